"""The floors of bench/compare.py: two minimal forwarders in C (bench/floors/), each
direction of each connection a thread blocked in the kernel, as the physical floor of a
user-space splice or copy proxy on this kernel. Every bulk table shows each peer's ratio
to them. Standard library only."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLOOR_DIR = HERE / "floors"
# peer -> its source next to floor.c
FLOOR_PEERS = {
    # two threads per connection blocked in splice() through a 1 MiB pipe (F_SETPIPE_SZ)
    "floor-splice": "splice_floor.c",
    # the same with read()/write() of 256 KiB
    "floor-copy": "copy_floor.c",
}
# The rows the floor tables divide: (label, workload, metric key, unit, higher_is_better)
FLOOR_ROWS = [
    ("Bulk 1 stream c→s", "bulk1-fwd", "gbps", "Gbit/s", True),
    ("Bulk 1 stream s→c", "bulk1-rev", "gbps", "Gbit/s", True),
    ("Bulk 8 streams c→s", "bulk8-fwd", "gbps", "Gbit/s", True),
    ("Bulk 8 streams s→c", "bulk8-rev", "gbps", "Gbit/s", True),
    ("Proxy CPU, bulk 1 c→s", "bulk1-fwd", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, bulk 1 s→c", "bulk1-rev", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, bulk 8 c→s", "bulk8-fwd", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, bulk 8 s→c", "bulk8-rev", "cpu_s_per_gb", "CPU s/GB", False),
]
CFLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]


def compiler() -> list[str]:
    """$CC if set, else the system's cc."""
    return shlex.split(os.environ.get("CC", "")) or ["cc"]


def build_floors(out_dir: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Compiles each floor into out_dir: ({peer: binary}, {peer: why it is missing}).
    A few hundred milliseconds each, so they are built afresh for every run."""
    bins: dict[str, Path] = {}
    errs: dict[str, str] = {}
    cc = compiler()
    if shutil.which(cc[0]) is None:
        return {}, {p: f"{cc[0]} not installed (apt-get install gcc)" for p in FLOOR_PEERS}
    for peer, source in FLOOR_PEERS.items():
        out = out_dir / peer
        argv = cc + CFLAGS + ["-o", str(out), str(FLOOR_DIR / source), str(FLOOR_DIR / "floor.c")]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            errs[peer] = f"{shlex.join(argv[:2])} …: {e}"
            continue
        if r.returncode != 0:
            errs[peer] = f"{shlex.join(argv)} failed: {(r.stdout + r.stderr).strip()[-300:]}"
            continue
        bins[peer] = out
    return bins, errs


def describe_floors(bins: dict[str, Path]) -> str:
    """What built the floors, for the report's header."""
    cc = compiler()
    try:
        r = subprocess.run(cc + ["--version"], capture_output=True, text=True, timeout=10)
        version = (r.stdout.splitlines() or ["?"])[0].strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        version = f"unavailable ({e.__class__.__name__})"
    built = ", ".join(f"{p} (bench/floors/{FLOOR_PEERS[p]})" for p in bins) or "none built"
    return f"{built}; {shlex.join(cc + CFLAGS)}; {version}"


def floor_argv(binary: Path, listen_port: int, upstream_port: int) -> list[str]:
    # Both ports on 127.0.0.1: the floors know no other address.
    return [str(binary), str(listen_port), str(upstream_port)]


def floor_tables(med: dict, peers: list[str], workloads: list[str], fmt) -> list[str]:
    """One table per floor in the run: every other peer's median ÷ the floor's median, for
    the bulk Gbit/s and CPU s/GB rows of the run."""
    rows = [r for r in FLOOR_ROWS if r[1] in workloads]
    floors = [p for p in peers if p in FLOOR_PEERS]
    if not rows or not floors:
        return []
    L: list[str] = []
    for floor in floors:
        # Peers with none of these rows (the example gateway, a peer that failed) are left out.
        others = [p for p in peers if p != floor and any(
            med.get(w, {}).get(p, {}).get(k) is not None for _, w, k, _, _ in rows)]
        L += [f"## Ratio peer ÷ {floor} (bulk, same run)", "",
              f"Each peer's median ÷ {floor}'s median. Gbit/s: >1 is faster than the floor. "
              "CPU s/GB: >1 is that many times the floor's CPU per GB.", "",
              f"| Metric | better | {floor} | " + " | ".join(others) + " |",
              "|---|---|---:|" + "---:|" * len(others)]
        for label, w, k, unit, hib in rows:
            f = med.get(w, {}).get(floor, {}).get(k)
            cells = []
            for p in others:
                v = med.get(w, {}).get(p, {}).get(k)
                cells.append(f"{v / f:.2f}×" if (v is not None and f) else "n/a")
            L.append(f"| {label} | {'higher' if hib else 'lower'} | {fmt(f, unit)} {unit} | "
                     + " | ".join(cells) + " |")
        L.append("")
    return L
