#!/usr/bin/env python3
"""The last lines of `make test`: which tests skipped and why (their own "skipped: ..." line), read
from ctest's log of the run, so a skip is never silent. usage: skipped_tests.py BUILD_DIR"""
import os
import re
import sys


def skipped(log_text):
    """(test name, its reason) for each test whose output said it skipped."""
    found = []
    for block in log_text.split("----------------------------------------------------------\n\n"):
        name = re.search(r"^\d+/\d+ Test: (\S+)$", block, re.M)
        output = block.split("Output:\n", 1)[-1].split("<end of output>", 1)[0]
        reasons = [line.strip() for line in output.splitlines() if line.strip().lower().startswith("skipped")]
        if name and reasons:
            found.append((name.group(1), reasons[0]))
    return found


def main():
    log = os.path.join(sys.argv[1], "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(log):
        return 0
    with open(log, errors="replace") as f:
        found = skipped(f.read())
    if not found:
        print("make test: no test skipped")
        return 0
    print("make test: %d test(s) skipped:" % len(found))
    for name, reason in found:
        print("  %s: %s" % (name, reason))
    return 0


if __name__ == "__main__":
    sys.exit(main())
