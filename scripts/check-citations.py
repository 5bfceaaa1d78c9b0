#!/usr/bin/env python3
"""Checks that what the code's comments point at exists (issue 21): every
`docs/NAME.md §N` (or §N.M) cited in a source file is a numbered section of that document,
and every project file a comment names (`something.cpp`, `.hpp`, `.py`, `.sh`, or a
`docs/….md`) is a file of the tree. Prints one line per broken pointer and exits 1 if
there is any. Kernel and liburing sources (`io_uring/net.c`, `examples/proxy.c`) are not
this tree's files and are not checked.

    scripts/check-citations.py [ROOT]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SOURCE_DIRS = ("engine", "uring", "pipes", "tests", "bench", "scripts", "examples")
SOURCE_SUFFIXES = {".cpp", ".hpp", ".py", ".sh", ".build", ".c", ".h", ".go", ".toml"}
# A file and a section of it: docs/kernel.md §11, docs/kernel.md §1.7, kernel.md §3.
CITATION = re.compile(r"(?:docs/)?([\w-]+\.md)\s*§\s*(\d+(?:\.\d+)?)")
# A bare section after a citation in the same comment ("§2.1 and §3") refers to the same
# document; they are checked against the last document named on the line.
BARE_SECTION = re.compile(r"§\s*(\d+(?:\.\d+)?)")
FILE_NAME = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.(?:cpp|hpp|py|sh))\b")
DOC_NAME = re.compile(r"(?<![\w./-])(docs/[\w-]+\.md)\b")
HEADING = re.compile(r"^#{2,4}\s+(?:Appendix\s+)?(\d+(?:\.\d+)?)[.\s]")


def sections(doc: Path) -> set[str]:
    found = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = HEADING.match(line)
        if m:
            found.add(m.group(1))
    return found


def comment_text(path: Path, line: str) -> str:
    """The part of a line that is a comment (or, for docs-like files, all of it)."""
    if path.suffix in (".py", ".sh", ".build", ".toml"):
        i = line.find("#")
        return line[i:] if i >= 0 else ""
    i = line.find("//")
    if i >= 0:
        return line[i:]
    stripped = line.lstrip()
    if stripped.startswith("*") or stripped.startswith("/*"):
        return stripped
    return ""


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    docs = {p.name: p for p in (root / "docs").glob("*.md")}
    known_sections = {name: sections(p) for name, p in docs.items()}
    tree_files = {p.relative_to(root).as_posix() for d in SOURCE_DIRS + ("docs",)
                  for p in (root / d).rglob("*") if p.is_file()}
    tree_files |= {p.name for p in root.iterdir() if p.is_file()}
    # Made by the build from NAME.in (uringfwd/version.hpp): the template counts.
    tree_files |= {f[:-3] for f in tree_files if f.endswith(".in")}
    basenames = {Path(f).name for f in tree_files}
    problems = []
    for d in SOURCE_DIRS:
        for path in sorted((root / d).rglob("*")):
            if not path.is_file() or path.suffix not in SOURCE_SUFFIXES:
                continue
            if "corpus" in path.parts or path.name == Path(__file__).name:
                continue
            rel = path.relative_to(root).as_posix()
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                     .splitlines(), start=1):
                text = comment_text(path, line)
                if not text:
                    continue
                doc = None
                for m in CITATION.finditer(text):
                    doc = m.group(1)
                    if doc not in known_sections:
                        problems.append(f"{rel}:{n}: cites {doc}, which docs/ does not have")
                    elif m.group(2) not in known_sections[doc]:
                        problems.append(f"{rel}:{n}: cites {doc} §{m.group(2)}, which is no "
                                        f"section of it")
                if doc in known_sections:
                    cited = {m.group(2) for m in CITATION.finditer(text)}
                    for m in BARE_SECTION.finditer(text):
                        if m.group(1) not in cited and m.group(1) not in known_sections[doc]:
                            problems.append(f"{rel}:{n}: §{m.group(1)} (of {doc}) is no "
                                            f"section of it")
                for m in DOC_NAME.finditer(text):
                    if m.group(1) not in tree_files:
                        problems.append(f"{rel}:{n}: names {m.group(1)}, which does not exist")
                for m in FILE_NAME.finditer(text):
                    name = m.group(1)
                    if name in tree_files or Path(name).name in basenames:
                        continue
                    problems.append(f"{rel}:{n}: names {name}, which is no file of the tree")
    for p in problems:
        print(p)
    print(f"citations: {len(problems)} broken" if problems else "citations: all point at what exists")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
