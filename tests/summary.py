#!/usr/bin/env python3
"""Counts test cases in meson's JUnit log (GoogleTest cases one by one) and prints
the line CI reads: "N passed, M failed" (", K skipped" when any were skipped).

usage: summary.py testlog.junit.xml MESON_EXIT_STATUS
A non-zero meson status with no failed case (a crash, a timeout) counts as one failure.
"""
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    path, status = sys.argv[1], int(sys.argv[2])
    passed = failed = skipped = 0
    try:
        root = ET.parse(path).getroot()
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
    except (OSError, ET.ParseError) as e:
        print(f"cannot read {path}: {e}", file=sys.stderr)
    if status != 0 and failed == 0:
        failed = 1
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
