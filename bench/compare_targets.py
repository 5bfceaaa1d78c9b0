"""Issue 14's targets as one table: each uring-fwd variant of the run against the floors
and HAProxy, every ratio from the same interleaved run's medians, with the target it is
held to and whether it is met. Standard library only.

Where HAProxy runs in two configurations (haproxy-splice, haproxy), a target is held
against the better of the two on that row (the higher rate, the lower CPU or latency):
the issue asks uring-fwd to be ahead of HAProxy's best setting, not its worst."""

from __future__ import annotations

FLOORS = ("floor-splice", "floor-copy")
HAPROXIES = ("haproxy-splice", "haproxy")
VARIANTS = ("uring-fwd", "uring-fwd-copy", "uring-fwd-parked")

# (target, label, workload, key, unit, higher is better, reference, bound)
# reference: "floor-splice", "fastest-floor", "haproxy-splice" or "best-haproxy".
# A row is met when mine ÷ reference is >= bound (higher is better) or <= bound.
ROWS = [
    (1, "CPU, bulk 1 c→s", "bulk1-fwd", "cpu_s_per_gb", "s/GB", False, "floor-splice", 1.15),
    (1, "CPU, bulk 1 s→c", "bulk1-rev", "cpu_s_per_gb", "s/GB", False, "floor-splice", 1.15),
    (1, "CPU, bulk 8 c→s", "bulk8-fwd", "cpu_s_per_gb", "s/GB", False, "floor-splice", 1.15),
    (1, "CPU, bulk 8 s→c", "bulk8-rev", "cpu_s_per_gb", "s/GB", False, "floor-splice", 1.15),
    (1, "CPU, bulk 1 c→s", "bulk1-fwd", "cpu_s_per_gb", "s/GB", False, "haproxy-splice", 0.8),
    (1, "CPU, bulk 1 s→c", "bulk1-rev", "cpu_s_per_gb", "s/GB", False, "haproxy-splice", 0.8),
    (1, "CPU, bulk 8 c→s", "bulk8-fwd", "cpu_s_per_gb", "s/GB", False, "haproxy-splice", 0.8),
    (1, "CPU, bulk 8 s→c", "bulk8-rev", "cpu_s_per_gb", "s/GB", False, "haproxy-splice", 0.8),
    (2, "Gbit/s, bulk 1 c→s", "bulk1-fwd", "gbps", "Gbit/s", True, "fastest-floor", 1.0),
    (2, "Gbit/s, bulk 1 s→c", "bulk1-rev", "gbps", "Gbit/s", True, "fastest-floor", 1.0),
    (2, "Gbit/s, bulk 1 c→s", "bulk1-fwd", "gbps", "Gbit/s", True, "haproxy-splice", 1.2),
    (2, "Gbit/s, bulk 1 s→c", "bulk1-rev", "gbps", "Gbit/s", True, "haproxy-splice", 1.2),
    (3, "gateway req/s", "gateway", "req_per_s", "req/s", True, "best-haproxy", 1.1),
    (3, "gateway CPU per request", "gateway", "cpu_us_per_req", "µs", False, "best-haproxy", 0.7),
    (3, "gateway p99", "gateway", "p99_us", "µs", False, "best-haproxy", 0.9),
    (4, "churn CPU per connection", "churn", "cpu_ms_per_1k_conn", "ms/1k", False,
     "best-haproxy", 0.7),
    (5, "syscalls per GB, 8 streams", "syscalls8", "syscalls_per_gb", "calls/GB", False,
     "best-haproxy", 0.25),
]


def _reference(med: dict, w: str, k: str, ref: str, higher: bool) -> tuple[str, float] | None:
    """(peer, median) the row is held against, or None when the run lacks it."""
    if ref in ("fastest-floor", "best-haproxy"):
        names = FLOORS if ref == "fastest-floor" else HAPROXIES
        have = [(p, med.get(w, {}).get(p, {}).get(k)) for p in names]
        have = [(p, v) for p, v in have if v]
        if not have:
            return None
        return max(have, key=lambda pv: pv[1]) if higher else min(have, key=lambda pv: pv[1])
    v = med.get(w, {}).get(ref, {}).get(k)
    return (ref, v) if v else None


def targets_table(med: dict, peers: list[str], workloads: list[str], fmt) -> list[str]:
    """Markdown lines: one table per uring-fwd variant in the run; empty when the run has
    neither a floor nor HAProxy."""
    if not any(p in peers for p in FLOORS + HAPROXIES):
        return []
    L: list[str] = []
    for mine in [p for p in VARIANTS if p in peers]:
        lines = []
        for target, label, w, k, unit, higher, ref, bound in ROWS:
            if w not in workloads:
                continue
            v = med.get(w, {}).get(mine, {}).get(k)
            r = _reference(med, w, k, ref, higher)
            if v is None or r is None:
                continue
            ratio = v / r[1]
            met = ratio >= bound if higher else ratio <= bound
            lines.append(f"| {target} | {label} | {fmt(v, unit)} | {r[0]} {fmt(r[1], unit)} | "
                         f"{ratio:.2f}× | {'≥' if higher else '≤'} {bound}× | "
                         f"{'met' if met else '**missed**'} |")
        if lines:
            L += [f"## Issue 14's targets: {mine} (same run, medians)", "",
                  "| # | row | mine | held against | ratio | target | |",
                  "|---:|---|---:|---:|---:|---:|---|", *lines, ""]
    return L
