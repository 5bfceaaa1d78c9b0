#!/usr/bin/env python3
"""Prints the line CI reads, "N passed, M failed" (", K skipped" when any were), from
the steps of test.sh.

usage: summary.py STEP...
  STEP = path/to/testlog.junit.xml:STATUS  meson's JUnit log (GoogleTest cases are
                                           counted one by one) and meson's exit status;
                                           a non-zero status with no failed case (a
                                           crash, a timeout) counts as one failure, and
                                           so does a log that is missing, unreadable or
                                           holds no case (test.sh deletes it before each
                                           run, so an earlier run's is never counted)
       | NAME:ok | NAME:fail | NAME:skip    a step that is one test on its own
"""
import sys
import xml.etree.ElementTree as ET


def count_junit(path: str, status: int) -> tuple[int, int, int]:
    passed = failed = skipped = 0
    try:
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
    except (OSError, ET.ParseError) as e:
        print(f"cannot read {path}: {e}: counted as 1 failure", file=sys.stderr)
        return 0, 1, 0
    if passed + failed + skipped == 0:
        print(f"{path}: no test case in it: counted as 1 failure", file=sys.stderr)
        return 0, 1, 0
    if status != 0 and failed == 0:
        print(f"{path}: meson exited {status} without a failed case: counted as 1 failure",
              file=sys.stderr)
        failed = 1
    return passed, failed, skipped


def main() -> int:
    passed = failed = skipped = 0
    for step in sys.argv[1:]:
        name, _, outcome = step.rpartition(":")
        if name.endswith(".xml"):
            p, f, s = count_junit(name, int(outcome))
        elif outcome == "ok":
            p, f, s = 1, 0, 0
        elif outcome == "skip":
            p, f, s = 0, 0, 1
        else:
            print(f"{name}: failed", file=sys.stderr)
            p, f, s = 0, 1, 0
        passed, failed, skipped = passed + p, failed + f, skipped + s
    if not sys.argv[1:]:
        failed = 1
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
