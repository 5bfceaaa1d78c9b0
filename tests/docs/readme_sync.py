#!/usr/bin/env python3
"""Keeps what the README says of the binary in step with what the code does.

    readme_sync.py SOURCE_ROOT BUILT_MAN_PAGE

Fails (status 1, one line per difference) when
  - the SIGUSR1 list in the README does not name exactly the counters of
    engine/include/uringfwd/counter_list.hpp and the close reasons of close_reason.hpp
    (each `closed_<reason>`), and `cqes_per_enter`;
  - the reasons the README's metrics table gives uringfwd_upstream_connect_failures_total
    are not exactly the connect failure kinds of connect_failure.hpp;
  - the README's package upgrade names another signal than debian/uring-fwd.postinst
    sends;
  - the README's flags from --listen to --inspect-timeout (which --config replaces)
    are not the man page's "Route (without --config)" options;
  - a `man -l PAGE` the README shows is not the page the build writes, or the man page
    source read as it is in the tree (man -l docs/uring-fwd.1.in) shows a @PLACEHOLDER@.
Then it proves it can fail: with one counter and the upgrade signal changed in a copy of
the README, the comparison must name them.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from man_page_sync import sections, subsection, tagged_flags  # noqa: E402

FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][A-Za-z0-9-]*)")


def macro_block(text, name):
    """The lines of `#define name(...)` up to the first line not continued by '\\'."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(f"#define {name}("))
    block = []
    for line in lines[start + 1:]:
        block.append(line)
        if not line.rstrip().endswith("\\"):
            break
    return "\n".join(block)


def code_counters(root):
    include = os.path.join(root, "engine", "include", "uringfwd")
    with open(os.path.join(include, "counter_list.hpp"), encoding="utf-8") as f:
        counters = re.findall(r"X\((\w+), (?:Counter|Gauge),",
                              macro_block(f.read(), "URINGFWD_PLAIN_COUNTERS"))
    with open(os.path.join(include, "close_reason.hpp"), encoding="utf-8") as f:
        reasons = re.findall(r"R\(arg, \w+, (\w+),", macro_block(f.read(), "URINGFWD_CLOSE_REASONS"))
    if not counters or not reasons:
        sys.exit("readme_sync: no counter or close reason found in the headers")
    return set(counters) | {f"closed_{r}" for r in reasons} | {"cqes_per_enter"}


def code_connect_failures(root):
    path = os.path.join(root, "engine", "include", "uringfwd", "connect_failure.hpp")
    with open(path, encoding="utf-8") as f:
        kinds = re.findall(r"F\(arg, \w+, (\w+),", macro_block(f.read(), "URINGFWD_CONNECT_FAILURES"))
    if not kinds:
        sys.exit("readme_sync: no connect failure kind found in connect_failure.hpp")
    return set(kinds)


def connect_failure_problems(readme, kinds):
    row = next((l for l in readme.splitlines()
                if l.startswith("| `uringfwd_upstream_connect_failures_total`")), None)
    if row is None or "failed connects:" not in row:
        return ["README: no metrics table row \"uringfwd_upstream_connect_failures_total\" "
                "with \"failed connects: ...\""]
    named = set(re.findall(r"`([a-z_]+)`", row[row.index("failed connects:"):]))
    problems = [f"{k}: a connect failure kind the README's metrics table lacks"
                for k in sorted(kinds - named)]
    problems += [f"{k}: in the README's connect failure reasons, but no kind of the code"
                 for k in sorted(named - kinds)]
    return problems


def paragraph(readme, start):
    """The paragraph (up to a blank line) that begins with `start`."""
    at = readme.find(start)
    if at < 0:
        return None
    end = readme.find("\n\n", at)
    return readme[at:end if end >= 0 else len(readme)]


def sigusr1_names(readme):
    text = paragraph(readme, "Signals:")
    if text is None or "SIGUSR1 prints" not in text:
        return None
    # The list runs from "SIGUSR1 prints" to the sentence on EngineStats.
    text = text[text.index("SIGUSR1 prints"):text.index("The same counters are")]
    return set(re.findall(r"`([a-z_0-9]+)`", text))


def counter_problems(readme, counters):
    named = sigusr1_names(readme)
    if named is None:
        return ["README: no \"Signals: ... SIGUSR1 prints\" paragraph"]
    problems = [f"{c}: a counter of the code the README's SIGUSR1 list lacks"
                for c in sorted(counters - named)]
    problems += [f"{c}: in the README's SIGUSR1 list, but no counter of the code"
                 for c in sorted(named - counters)]
    return problems


def postinst_signal(root):
    with open(os.path.join(root, "debian", "uring-fwd.postinst"), encoding="utf-8") as f:
        sent = re.findall(r"^\s*systemctl kill .*--signal=(SIG[A-Z0-9+]+)", f.read(), re.M)
    if len(sent) != 1:
        sys.exit(f"readme_sync: postinst sends {sent}, not one signal")
    return sent[0]


def upgrade_problems(readme, signal):
    text = paragraph(readme, "Upgrading the package")
    if text is None:
        return ["README: no \"Upgrading the package\" paragraph"]
    named = set(re.findall(r"\bSIG[A-Z0-9+]+", text))
    if named != {signal}:
        return [f"README: the package upgrade names {sorted(named)}; postinst sends {signal}"]
    return []


def readme_route_flags(readme):
    """The flags of the README's flag block from --listen to --inspect-timeout."""
    lines = readme.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("  -l, --listen")), None)
    end = next((i for i, l in enumerate(lines) if l.startswith("  --inspect-timeout")), None)
    if start is None or end is None:
        return None
    flags = set()
    for line in lines[start:end + 1]:
        m = re.match(r"^  (-\w, --[\w-]+|--[\w-]+)", line)  # "  -l, --listen ADDR"
        if m:
            flags.update(FLAG.findall(m.group(1)))
    return flags


def route_flag_problems(readme, man_source):
    flags = readme_route_flags(readme)
    if flags is None:
        return ["README: no flag block from \"  -l, --listen\" to \"  --inspect-timeout\""]
    man = {f for f in tagged_flags(subsection(sections(man_source).get("OPTIONS", []),
                                              "Route (without --config)"))
           if f.startswith("--")}
    problems = [f"{f}: a route option of the man page the README's --listen..--inspect-timeout "
                f"block lacks" for f in sorted(man - flags)]
    problems += [f"{f}: in the README's --listen..--inspect-timeout block, no route option of "
                 f"the man page" for f in sorted(flags - man)]
    return problems


def man_problems(readme, root, built_page):
    problems = []
    for page in re.findall(r"man -l (\S+?)`", readme):
        # "build/..." is the build directory the reader made (meson setup build).
        if not page.startswith("build/"):
            problems.append(f"README: `man -l {page}` is no page the build writes (build/...)")
            continue
        built = os.path.relpath(built_page, os.path.dirname(os.path.dirname(built_page)))
        if page[len("build/"):] != built:
            problems.append(f"README: `man -l {page}`, but the build writes {built}")
    groff = shutil.which("groff")
    if groff is None:
        print("readme_sync: no groff: the source page's rendering is not checked")
        return problems
    source = os.path.join(root, "docs", "uring-fwd.1.in")
    shown = subprocess.run([groff, "-man", "-Tutf8", source], capture_output=True, text=True,
                           timeout=30, check=True).stdout
    for placeholder in sorted(set(re.findall(r"@[A-Z_]+@", shown))):
        problems.append(f"docs/uring-fwd.1.in: read in the tree it shows {placeholder}")
    return problems


def self_check(readme, counters, signal, kinds):
    broken = readme.replace("`inline_yields`", "`inline_yeelds`")
    broken = broken.replace(f"`{signal}`", "`SIGUSR2`", 1)
    broken = broken.replace("`timed_out`, `other` |", "`timedout`, `other` |", 1)
    found = (counter_problems(broken, counters) + upgrade_problems(broken, signal) +
             connect_failure_problems(broken, kinds))
    want = ["inline_yields: a counter", "inline_yeelds: in the README", "README: the package",
            "timed_out: a connect failure kind", "timedout: in the README"]
    if len(found) != len(want) or any(not p.startswith(w) for p, w in zip(found, want)):
        sys.exit(f"readme_sync: self-check failed: a misspelt counter, SIGUSR2 and a misspelt "
                 f"connect failure reported {found}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, built_page = sys.argv[1:]
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    with open(os.path.join(root, "docs", "uring-fwd.1.in"), encoding="utf-8") as f:
        man_source = f.read()
    counters = code_counters(root)
    signal = postinst_signal(root)
    kinds = code_connect_failures(root)
    problems = counter_problems(readme, counters)
    problems += connect_failure_problems(readme, kinds)
    problems += upgrade_problems(readme, signal)
    problems += route_flag_problems(readme, man_source)
    problems += man_problems(readme, root, built_page)
    for p in problems:
        print(f"readme_sync: {p}")
    if problems:
        return 1
    self_check(readme, counters, signal, kinds)
    print(f"readme_sync: ok: {len(counters)} counters, {len(kinds)} connect failure kinds, the "
          f"upgrade's {signal}, the route flags and the man page")
    return 0


if __name__ == "__main__":
    sys.exit(main())
