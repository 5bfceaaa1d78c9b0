#!/usr/bin/env python3
"""Keeps uring-fwd(1) in step with the binary and the example configuration.

    man_page_sync.py BINARY MAN_PAGE EXAMPLE_CONFIG

Fails (status 1, one line per difference, naming the flag or key) when
  - a flag `BINARY --help` prints is not described in the man page's OPTIONS section,
    or OPTIONS describes a flag --help does not print;
  - a key of EXAMPLE_CONFIG (which shows every key, some commented out) is not named in
    the man page's CONFIGURATION FILE section.
Then it proves it can fail: with one OPTIONS entry and one key removed from a copy of the
page, the same comparison must name exactly those.
"""
import re
import subprocess
import sys

# A flag in --help's option column or in a man page tag line: -c, --config, --no-steering.
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)")


def help_flags(binary):
    """The flags of the option lines of --help (CLI11 prints them indented, one option
    per line: "  -c,--config TEXT   text"); wrapped description lines start with more
    spaces and no dash."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    flags = set()
    for line in out.splitlines():
        m = re.match(r"^ {1,4}(-\S+)", line)
        if m:
            # "-c,--config" or "--balance" (the type and default follow after a space).
            flags.update(f for f in m.group(1).split(",") if FLAG.fullmatch(f))
    if not flags:
        sys.exit(f"man_page_sync: no flag found in `{binary} --help`:\n{out}")
    return flags


def plain(roff_line):
    """A roff line with escapes reduced to text: \\- to -, font changes removed."""
    text = roff_line.replace("\\-", "-").replace("\\(en", "-").replace("\\&", "")
    text = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", text)
    return text.replace('"', " ")


def sections(page):
    """{section name: [lines]} for each .SH of the page."""
    result, current = {}, None
    for line in page.splitlines():
        m = re.match(r'^\.SH\s+"?([^"]*)"?\s*$', line)
        if m:
            current = m.group(1).strip()
            result[current] = []
        elif current is not None:
            result[current].append(line)
    return result


def man_flags(page):
    """The flags of OPTIONS's tagged paragraphs: the line after each .TP is its tag
    (".BR \\-c \", \" \\-\\-config \" \\fIfile\\fR"); flags named in the descriptions
    (".B \\-\\-listen" in a sentence) are references, not entries."""
    lines = sections(page).get("OPTIONS")
    if lines is None:
        sys.exit("man_page_sync: the man page has no .SH OPTIONS section")
    flags = set()
    for i, line in enumerate(lines):
        if line.strip() == ".TP" and i + 1 < len(lines):
            tag = re.sub(r"^\.[A-Z]+\s*", "", lines[i + 1])  # drop the font macro
            flags.update(FLAG.findall(plain(tag)))
    return flags


def example_keys(config_text):
    """Every key of the example, set or commented out ("# cpus = ..." shows an optional
    key): the left-hand side of each assignment line."""
    keys = set()
    for line in config_text.splitlines():
        m = re.match(r"^\s*#?\s*([a-z_]+)\s*=", line)
        if m:
            keys.add(m.group(1))
    return keys


# Which arguments of a font-alternating macro are bold: .B all, .BR/.BI the 1st, 3rd, ...,
# .RB/.IB the 2nd, 4th, ...
BOLD_ARGS = {".B": None, ".BR": 0, ".BI": 0, ".RB": 1, ".IB": 1}


def bold_words(line):
    """The words a man(7) line sets in bold: the bold arguments of .B/.BR/.RB/.BI/.IB,
    and \\fB...\\fR runs anywhere."""
    words = []
    for run in re.findall(r"\\fB(.*?)\\f[RIP]", line):
        words += re.findall(r"[a-z_]+", plain(run))
    parts = line.split(None, 1)
    if parts and parts[0] in BOLD_ARGS and len(parts) == 2:
        args = re.findall(r'"[^"]*"|\S+', parts[1])
        first = BOLD_ARGS[parts[0]]
        for i, arg in enumerate(args):
            if first is None or i % 2 == first:
                words += re.findall(r"[a-z_]+", plain(arg))
    return words


def man_keys(page):
    """The keys CONFIGURATION FILE names, in bold as a key should be."""
    lines = sections(page).get("CONFIGURATION FILE")
    if lines is None:
        sys.exit("man_page_sync: the man page has no .SH \"CONFIGURATION FILE\" section")
    return {word for line in lines for word in bold_words(line)}


def differences(help_set, page, config_keys):
    problems = []
    in_man = man_flags(page)
    for flag in sorted(help_set - in_man):
        problems.append(f"{flag}: printed by --help but not described in the man page's OPTIONS")
    for flag in sorted(in_man - help_set):
        problems.append(f"{flag}: described in the man page's OPTIONS but not printed by --help")
    for key in sorted(config_keys - man_keys(page)):
        problems.append(f"{key}: a key of the example configuration not named in the man "
                        f"page's CONFIGURATION FILE")
    return problems


def self_check(help_set, page, config_keys):
    """The comparison must notice a dropped OPTIONS entry and a dropped key, by name."""
    lines = page.splitlines()
    start = lines.index(".SH OPTIONS")
    tp = lines.index(".TP", start)
    # The entry's tag line names its flags; delete the .TP and the tag.
    dropped_flags = set(FLAG.findall(plain(re.sub(r"^\.[A-Z]+\s*", "", lines[tp + 1]))))
    broken = lines[:tp] + lines[tp + 2:]
    key = "resolve_interval"
    broken = [line.replace(key, "") for line in broken]
    found = differences(help_set, "\n".join(broken), config_keys)
    want = [f"{f}: printed by --help" for f in sorted(dropped_flags)] + [f"{key}: a key"]
    if len(found) != len(want) or any(not p.startswith(w) for p, w in zip(found, want)):
        sys.exit("man_page_sync: self-check failed: dropping the entry of "
                 f"{sorted(dropped_flags)} and the key {key} reported {found}")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    binary, man_path, config_path = sys.argv[1:]
    with open(man_path, encoding="utf-8") as f:
        page = f.read()
    with open(config_path, encoding="utf-8") as f:
        config_keys = example_keys(f.read())
    help_set = help_flags(binary)
    problems = differences(help_set, page, config_keys)
    for p in problems:
        print(f"man_page_sync: {man_path}: {p}")
    if problems:
        return 1
    self_check(help_set, page, config_keys)
    print(f"man_page_sync: ok: {len(help_set)} flags and {len(config_keys)} configuration "
          f"keys in {man_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
