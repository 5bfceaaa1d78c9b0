"""The report of bench/compare.py: the rows, the medians over rounds, and the markdown with
its ratio tables (the floors' and the example gateway's come from their modules).
Standard library only."""

from __future__ import annotations

import compare_sni

import re
import statistics

from compare_baseline import BASE_PEER
from compare_example_gateway import GATEWAY_PEER, gateway_table
from compare_floors import floor_tables
from compare_targets import targets_table
from compare_peers import URING_VARIANTS

# (row label, workload, metric key, unit, higher_is_better)
ROWS = [
    ("Bulk 1 stream c→s", "bulk1-fwd", "gbps", "Gbit/s", True),
    ("Bulk 1 stream s→c", "bulk1-rev", "gbps", "Gbit/s", True),
    ("Bulk 8 streams c→s", "bulk8-fwd", "gbps", "Gbit/s", True),
    ("Bulk 8 streams s→c", "bulk8-rev", "gbps", "Gbit/s", True),
    ("RR 64 B p50", "rr64", "p50_us", "µs", False),
    ("RR 64 B p99", "rr64", "p99_us", "µs", False),
    ("RR 64 B p99.9", "rr64", "p999_us", "µs", False),
    ("RR 16 KiB p50", "rr16k", "p50_us", "µs", False),
    ("RR 16 KiB p99", "rr16k", "p99_us", "µs", False),
    ("RR 16 KiB p99.9", "rr16k", "p999_us", "µs", False),
    ("Churn (new conn + req/resp)", "churn", "conn_per_s", "conn/s", True),
    ("Gateway (keep-alive 128 B req/resp)", "gateway", "req_per_s", "req/s", True),
    ("Gateway p50", "gateway", "p50_us", "µs", False),
    ("Gateway p99", "gateway", "p99_us", "µs", False),
    ("Proxy CPU, bulk 1 c→s", "bulk1-fwd", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, bulk 1 s→c", "bulk1-rev", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, bulk 8 c→s", "bulk8-fwd", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, bulk 8 s→c", "bulk8-rev", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, churn", "churn", "cpu_ms_per_1k_conn", "CPU ms/1k conn", False),
    *compare_sni.ROWS,
    ("Proxy CPU, gateway", "gateway", "cpu_us_per_req", "CPU µs/req", False),
    ("Proxy CPU utilisation, bulk 1 c→s", "bulk1-fwd", "proxy_cpu_util", "cores", False),
    # What a round trip's latency costs: busy polling trades CPU for it.
    ("Proxy CPU utilisation, RR 64 B", "rr64", "proxy_cpu_util", "cores", False),
    ("Proxy CPU utilisation, RR 16 KiB", "rr16k", "proxy_cpu_util", "cores", False),
    ("Syscalls, 1 stream -n transfer", "syscalls", "syscalls_per_gb", "calls/GB", False),
    ("Syscalls, 8 streams -n transfer", "syscalls8", "syscalls_per_gb", "calls/GB", False),
    ("Proxy RSS after bulk 1 c→s", "bulk1-fwd", "rss_kib", "KiB", False),
    ("Proxy RSS after bulk 8 c→s", "bulk8-fwd", "rss_kib", "KiB", False),
    ("Proxy RSS after churn", "churn", "rss_kib", "KiB", False),
    ("Proxy RSS after gateway", "gateway", "rss_kib", "KiB", False),
    ("io-wq threads, peak bulk 8 c→s", "bulk8-fwd", "iowq_peak", "threads", False),
    ("io-wq threads, peak bulk 1 c→s", "bulk1-fwd", "iowq_peak", "threads", False),
    ("io-wq threads, peak churn", "churn", "iowq_peak", "threads", False),
]


def fmt(v, unit: str) -> str:
    if v is None:
        return "n/a"
    if unit in ("KiB", "threads", "conn/s", "req/s", "calls/GB"):
        return f"{v:,.0f}"
    if unit == "Gbit/s":
        return f"{v:.2f}"
    if unit == "µs":
        return f"{v:.1f}"
    if unit == "CPU µs/req":
        return f"{v:.2f}"
    return f"{v:.3f}"


def summarise(results: dict, peers: list[str], workloads: list[str]) -> dict:
    """medians[workload][peer][metric] and reasons[workload][peer]."""
    med: dict = {}
    reasons: dict = {}
    for w in workloads:
        for p in peers:
            runs = results.get(w, {}).get(p, [])
            ok = [r for r in runs if not ({"error", "peer_failed", "skipped"} & r.keys())]
            bad = [r.get("peer_failed") or r.get("error") for r in runs
                   if {"error", "peer_failed"} & r.keys()]
            if bad:
                reasons.setdefault(w, {})[p] = {"failed_rounds": len(bad), "of": len(runs), "reason": bad[0]}
            keys = set().union(*[r.keys() for r in ok]) if ok else set()
            for k in keys:
                vals = [r[k] for r in ok if isinstance(r.get(k), (int, float))]
                if vals:
                    med.setdefault(w, {}).setdefault(p, {})[k] = statistics.median(vals)
                    med[w][p][k + "__n"] = len(vals)
                    med[w][p][k + "__min"] = min(vals)
                    med[w][p][k + "__max"] = max(vals)
    return {"medians": med, "reasons": reasons}


def paired_ratios(results: dict, w: str, k: str, mine: str, other: str) -> list[float]:
    """mine ÷ other for every round in which both measured k (one right after the other)."""
    def by_round(peer: str) -> dict:
        return {r["round"]: r[k] for r in results.get(w, {}).get(peer, [])
                if isinstance(r.get(k), (int, float))}
    a, b = by_round(mine), by_round(other)
    return [a[n] / b[n] for n in sorted(a) if b.get(n)]


def baseline_table(meta: dict, med: dict, results: dict, rows: list) -> list[str]:
    """uring-fwd against itself built from --baseline: the check that a refactor costs nothing.
    Three decimals and a per-round spread, since the question is a few percent."""
    b = meta["baseline"]
    short = b["short"] or "not built"
    L = [f"## uring-fwd vs {BASE_PEER} ({short})", "",
         f"{BASE_PEER} is uring-fwd built from `{b['rev']}` ({short}) with the same build options, "
         "started the same way. ratio = uring-fwd's median ÷ uring-fwd-base's median (same run); "
         "change = ratio − 1: + on throughput rows is faster, − on latency, CPU and RSS rows is less. "
         "per round = lowest–highest of the two peers' ratio within each round.", "",
         f"| Metric | Unit | better | {BASE_PEER} | uring-fwd | ratio | change | per round |",
         "|---|---|---|---:|---:|---:|---:|---:|"]
    for label, w, k, unit, hib in rows:
        if k.startswith("iowq"):
            continue
        v = med.get(w, {}).get(BASE_PEER, {}).get(k)
        u = med.get(w, {}).get("uring-fwd", {}).get(k)
        ratio = change = "n/a"
        if u is not None and v:
            ratio, change = f"{u / v:.3f}×", f"{(u / v - 1) * 100:+.1f}%"
        pr = paired_ratios(results, w, k, "uring-fwd", BASE_PEER)
        spread = "n/a" if not pr else f"{min(pr):.3f}–{max(pr):.3f}" if len(pr) > 1 else f"{pr[0]:.3f}"
        L.append(f"| {label} | {unit} | {'higher' if hib else 'lower'} | {fmt(v, unit)} | "
                 f"{fmt(u, unit)} | {ratio} | {change} | {spread} |")
    L.append("")
    return L


def spread_table(med: dict, rows: list, peers: list[str]) -> list[str]:
    """Each median's spread over the rounds, max ÷ min: the noise beside the figure. A
    spread far above the others' on one row is a finding (a figure that flips between two
    values), not noise to average away."""
    L = ["## Spread over rounds (max ÷ min)", "",
         "1.00× = every round gave the same figure; n = rounds that measured it.", "",
         "| Metric | " + " | ".join(peers) + " |", "|---|" + "---:|" * len(peers)]
    for label, w, k, unit, _ in rows:
        if k.startswith("iowq") or unit == "KiB":
            continue
        cells, any_val = [], False
        for p in peers:
            m = med.get(w, {}).get(p, {})
            lo, hi, n = m.get(k + "__min"), m.get(k + "__max"), m.get(k + "__n")
            if lo is None or not lo:
                cells.append("n/a")
                continue
            any_val = True
            cells.append(f"{hi / lo:.2f}× (n={n})")
        if any_val:
            L.append(f"| {label} | " + " | ".join(cells) + " |")
    L.append("")
    return L


def markdown(meta: dict, summary: dict, results: dict, peers: list[str], workloads: list[str]) -> str:
    med, reasons = summary["medians"], summary["reasons"]
    L = []
    L.append(f"# uring-fwd vs peers — {meta['date']}")
    L.append("")
    L.append(f"- Command: `{meta['command']}`")
    L.append(f"- Kernel: {meta['kernel']}; CPU: {meta['cpu_model']} ({meta['ncpu']} CPUs)")
    L.append(f"- Placement: {meta['placement']}")
    L.append(f"- TCP congestion control: {meta.get('congestion', '?')}")
    L.append(f"- Load average (1/5/15 min) at start: {meta['loadavg_start']}; at end: {meta.get('loadavg_end', '?')}"
             " (other work on the machine skews absolute numbers; ratios within a run are interleaved)")
    L.append(f"- Rounds: {meta['rounds']} (interleaved round → workload → peer; medians shown)")
    L.append(f"- Durations: iperf3 -t {meta['duration']}s, sockperf -t {meta['rr_duration']}s, "
             f"churn {meta['churn_duration']}s × {meta['churn_conns']} conns, "
             f"gateway {meta['gateway_duration']}s × {meta['gateway_conns']} keep-alive conns, "
             f"syscalls -n {meta['syscall_bytes']}")
    for k in ("uring-fwd", BASE_PEER, GATEWAY_PEER, "floors", "haproxy", "nginx", "go", "socat",
              "iperf3", "sockperf", "wrk", "strace"):
        if k not in (BASE_PEER, GATEWAY_PEER, "floors") or k in meta["versions"]:
            L.append(f"- {k}: {meta['versions'].get(k, '?')}")
    L.append("")
    rows = [r for r in ROWS if r[1] in workloads]
    shown_peers = peers
    L.append("## Medians")
    L.append("")
    L.append("| Metric | Unit | " + " | ".join(shown_peers) + " |")
    L.append("|---|---|" + "---:|" * len(shown_peers))
    for label, w, k, unit, _ in rows:
        cells = []
        any_val = False
        for p in shown_peers:
            v = med.get(w, {}).get(p, {}).get(k)
            any_val |= v is not None
            cells.append(fmt(v, unit))
        if not any_val and k.startswith("iowq"):
            continue
        L.append(f"| {label} | {unit} | " + " | ".join(cells) + " |")
    L.append("")
    L += spread_table(med, rows, shown_peers)
    if "baseline" in meta and {"uring-fwd", BASE_PEER} <= set(peers):
        L += baseline_table(meta, med, results, rows)
    L += floor_tables(med, peers, workloads, fmt)
    L += gateway_table(med, results, peers, workloads, fmt, paired_ratios)
    L += targets_table(med, peers, workloads, fmt)
    for mine in [p for p in peers if p == "uring-fwd" or p in URING_VARIANTS]:
        others = [p for p in peers if p != mine]
        L.append(f"## Ratio {mine} ÷ peer (same run)")
        L.append("")
        L.append("Throughput rows: >1 means uring-fwd is faster. Latency, CPU, syscall and RSS rows: <1 means uring-fwd uses less.")
        L.append("")
        L.append("| Metric | better | " + " | ".join(others) + " |")
        L.append("|---|---|" + "---:|" * len(others))
        for label, w, k, unit, hib in rows:
            if k.startswith("iowq"):
                continue
            u = med.get(w, {}).get(mine, {}).get(k)
            cells = []
            for p in others:
                v = med.get(w, {}).get(p, {}).get(k)
                cells.append(f"{u / v:.2f}×" if (u is not None and v) else "n/a")
            L.append(f"| {label} | {'higher' if hib else 'lower'} | " + " | ".join(cells) + " |")
        L.append("")
    if reasons:
        L.append("## n/a and failed rounds")
        L.append("")
        grouped: dict = {}
        for w, per in reasons.items():
            for p, r in per.items():
                key = (p, re.sub(r"\(\d+\)|pid \d+|\d{4,}", "…", r["reason"]))
                grouped.setdefault(key, []).append(f"{w} ({r['failed_rounds']}/{r['of']} rounds)")
        for (p, reason), ws in grouped.items():
            L.append(f"- **{p}** — {', '.join(ws)}: {reason}")
        L.append("")
    return "\n".join(L)
