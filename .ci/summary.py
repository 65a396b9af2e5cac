"""The end of ``make test``: one summary per interpreter and the slowest tests.

Reads the logs ``make test-cpython`` and ``make test-pypy`` tee'd (``.test-logs/``) and
prints, for each, pytest's last line (passed / failed / skipped, wall time), its failed
tests (pytest's "short test summary info") and its ``--durations`` table, so that a newcomer sees where the suite's minutes go without
scrolling back through two runs.  A missing log (a run that never started) is said so.
Runs on the system's python3 (no venv needed); prints only, never fails the build.
"""

from __future__ import annotations

import re
import sys
from typing import List, Optional, Tuple

_SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed|error|errors|skipped|deselected).*)$")
_DURATION = re.compile(r"^\d+\.\d+s (call|setup|teardown) ")
_FAILED = re.compile(r"^(FAILED|ERROR) ")


def _parse(text: str) -> Tuple[Optional[str], List[str], List[str]]:
    lines = text.splitlines()
    summary = None
    for line in reversed(lines):
        m = _SUMMARY.match(line.strip())
        if m and " in " in line:
            summary = m.group(1).strip(" =")
            break
    slowest: List[str] = []
    for i, line in enumerate(lines):
        if "slowest" in line and "durations" in line:
            for row in lines[i + 1:]:
                if not _DURATION.match(row):
                    break
                slowest.append(row)
            break
    failed = [line for line in lines if _FAILED.match(line)]
    return summary, slowest, failed


def main(argv: List[str]) -> int:
    for spec in argv:
        name, _, path = spec.partition("=")
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            print(f"== {name}: no log ({path}): the run did not start")
            continue
        summary, slowest, failed = _parse(text)
        print(f"== {name}: {summary or 'no pytest summary (the run was interrupted?)'}")
        for row in failed:
            print("   " + row)
        if slowest:
            print(f"   slowest {len(slowest)}:")
            for row in slowest:
                print("   " + row)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
