#!/usr/bin/env python3
"""Keeps uring-fwd(1) in step with the binary and the example configuration.

    man_page_sync.py BINARY MAN_PAGE EXAMPLE_CONFIG

Fails (status 1, one line per difference, naming the flag or key) when
  - a flag `BINARY --help` prints is not described in the man page's OPTIONS section,
    or OPTIONS describes a flag --help does not print;
  - a key of EXAMPLE_CONFIG (which shows every key, some commented out) is not named in
    the man page's CONFIGURATION FILE section;
  - the route flags, which --config replaces, differ between --config's --help text,
    the man page's "Route (without --config)" options and its --config entry, or the
    binary does not refuse one of them beside --config with the key the file uses;
  - a command line the EXIT STATUS section shows for a status returns another.
Then it proves it can fail: with one OPTIONS entry and one key removed from a copy of the
page, the same comparison must name exactly those, and with a route option removed from
a copy, the route flag comparison must name it.
"""
import re
import shlex
import subprocess
import sys

# A flag in --help's option column or in a man page tag line: -c, --config, --no-steering.
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)")


def help_text(binary):
    return subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30,
                          check=True).stdout


def help_flags(out, binary):
    """The flags of the option lines of --help (CLI11 prints them indented, one option
    per line: "  -c,--config TEXT   text"); wrapped description lines start with more
    spaces and no dash."""
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


def help_config_flags(out):
    """The flags --config's --help text names (those it replaces)."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^ {1,4}-c,--config\b", line):
            text = line.split(None, 2)[2] if len(line.split(None, 2)) > 2 else ""
            for more in lines[i + 1:]:
                if re.match(r"^ {1,4}-", more) or not more.startswith(" "):
                    break
                text += " " + more.strip()
            return set(FLAG.findall(text)) - {"--config"}
    sys.exit("man_page_sync: --help has no -c,--config line")


def subsection(lines, title):
    """The lines of `.SS title` up to the next .SS or the end."""
    out, inside = [], False
    for line in lines:
        if line.startswith(".SS"):
            inside = plain(line[3:]).strip() == title
        elif inside:
            out.append(line)
    return out


def tagged_flags(lines):
    flags = set()
    for i, line in enumerate(lines):
        if line.strip() == ".TP" and i + 1 < len(lines):
            flags.update(FLAG.findall(plain(re.sub(r"^\.[A-Z]+\s*", "", lines[i + 1]))))
    return flags


def config_entry_flags(page):
    """The flags the OPTIONS entry of --config names in its text: its tag line up to the
    next .TP."""
    lines = sections(page).get("OPTIONS", [])
    for i, line in enumerate(lines):
        if line.strip() == ".TP" and i + 1 < len(lines) and "\\-\\-config" in lines[i + 1]:
            body = []
            for more in lines[i + 2:]:
                if more.strip() == ".TP":
                    break
                body.append(more)
            # Only the ".BR --flag ," list: the example error quoted in it names one again.
            return {f for l in body if re.match(r"^\.BR? \\-\\-", l)
                    for f in FLAG.findall(plain(l))} - {"--config"}
    return set()


# A value each route flag takes (None: a switch), to try it beside --config.
ROUTE_FLAG_VALUES = {
    "--listen": "127.0.0.1:1", "--dual-stack": None, "--upstream": "127.0.0.1:1",
    "--balance": "maglev", "--retries": "2", "--idle-timeout": "1m",
    "--max-connections": "5", "--connect-timeout": "1s", "--accept-proxy": None,
    "--trusted-sources": "10.0.0.0/8", "--send-proxy": "v1", "--inspect-timeout": "1s",
    "--allow": "10.0.0.0/8", "--deny": "10.0.0.1",
}


def route_flag_differences(config_help, page):
    problems = []
    # Long forms: --help's text names --listen, not its alias -l.
    route = {f for f in tagged_flags(subsection(sections(page).get("OPTIONS", []),
                                                "Route (without --config)"))
             if f.startswith("--")}
    entry = config_entry_flags(page)
    for name, found in (("the man page's \"Route (without --config)\" options", route),
                        ("the man page's --config entry", entry)):
        for flag in sorted(config_help - found):
            problems.append(f"{flag}: --config's --help replaces it, but {name} lacks it")
        for flag in sorted(found - config_help):
            problems.append(f"{flag}: in {name}, but --config's --help does not name it")
    return problems


def refusal_problems(binary, config_help, config_path):
    """Each route flag beside --config: refused (status 1), naming the file's key."""
    problems = []
    for flag in sorted(config_help):
        if flag not in ROUTE_FLAG_VALUES:
            problems.append(f"{flag}: add a value for it to ROUTE_FLAG_VALUES")
            continue
        value = ROUTE_FLAG_VALUES[flag]
        args = [binary, "--config", config_path, flag] + ([value] if value else [])
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        want = f"{flag} is a route setting: with --config, use "
        if r.returncode != 1 or want not in r.stderr:
            problems.append(f"{flag}: beside --config gave status {r.returncode} and "
                            f"{r.stderr.strip()!r}, not \"{want}...\"")
    return problems


def exit_status_examples(page):
    """[(status, command line)] of the EXIT STATUS section: each entry's tag is its
    status, and every quoted "uring-fwd ..." in it is a command line returning it."""
    lines = sections(page).get("EXIT STATUS", [])
    out, status = [], None
    for i, line in enumerate(lines):
        if line.strip() == ".TP" and i + 1 < len(lines):
            tag = plain(re.sub(r"^\.[A-Z]+\s*", "", lines[i + 1])).strip()
            status = int(tag) if tag.isdigit() else None  # "100-127" is no one status
        elif line.startswith(".PP"):
            status = None
        elif status is not None:
            for quoted in re.findall(r'"(uring\\-fwd[^"]*)"', line):
                out.append((status, plain(quoted).strip()))
    return out


def exit_status_problems(binary, page):
    examples = exit_status_examples(page)
    if len({status for status, _ in examples}) < 2:
        return ["EXIT STATUS: no command line shown per status"]
    problems = []
    for status, command in examples:
        r = subprocess.run([binary] + shlex.split(command)[1:], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != status:
            problems.append(f"EXIT STATUS {status}: `{command}` returns {r.returncode} "
                            f"({r.stderr.strip()})")
    return problems


def route_self_check(config_help, page):
    """Dropping a route option's entry must be reported, by name."""
    lines = page.splitlines()
    tag = next(i for i, l in enumerate(lines) if l.startswith(".B \\-\\-accept\\-proxy"))
    broken = "\n".join(lines[:tag - 1] + lines[tag + 1:])
    found = route_flag_differences(config_help, broken)
    if len(found) != 1 or not found[0].startswith("--accept-proxy: "):
        sys.exit(f"man_page_sync: self-check failed: dropping --accept-proxy's entry "
                 f"reported {found}")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    binary, man_path, config_path = sys.argv[1:]
    with open(man_path, encoding="utf-8") as f:
        page = f.read()
    with open(config_path, encoding="utf-8") as f:
        config_keys = example_keys(f.read())
    out = help_text(binary)
    help_set = help_flags(out, binary)
    config_help = help_config_flags(out)
    problems = differences(help_set, page, config_keys)
    problems += route_flag_differences(config_help, page)
    problems += refusal_problems(binary, config_help, config_path)
    problems += exit_status_problems(binary, page)
    for p in problems:
        print(f"man_page_sync: {man_path}: {p}")
    if problems:
        return 1
    self_check(help_set, page, config_keys)
    route_self_check(config_help, page)
    print(f"man_page_sync: ok: {len(help_set)} flags, {len(config_keys)} configuration "
          f"keys, {len(config_help)} route flags refused beside --config and "
          f"{len(exit_status_examples(page))} exit status examples in {man_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
