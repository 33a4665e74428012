"""Keep tests/slow.txt: the tests measured slow, which conftest.py marks `slow`.

    python -m pytest -q -p no:cacheprovider -m "not slow" --durations=0 --durations-min=0.01 \\
        | python -m tests.tiers

adds every test whose setup, call and teardown took THRESHOLD_S seconds or more together (pytest's
--durations lines, '12.03s call tests/x.py::test_y'); an id that no longer exists marks nothing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LIST = Path(__file__).with_name("slow.txt")
THRESHOLD_S = 0.5
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(tests/.+?)\s*$")
HEADER = (
    "# Tests measured slow: 0.5 s or more (setup + call + teardown) in `pytest -m 'not slow' --durations=0` on the 2-core\n"
    "# test machine, loaded as CI is; conftest.py marks them `slow`. Written by `python -m tests.tiers`.\n"
)


def slow_ids(durations_output: str, threshold_s: float = THRESHOLD_S) -> set[str]:
    spent: dict[str, float] = {}
    for line in durations_output.splitlines():
        match = _DURATION.match(line.strip())
        if match:
            spent[match.group(2)] = spent.get(match.group(2), 0.0) + float(match.group(1))
    return {test for test, seconds in spent.items() if seconds >= threshold_s}


def existing() -> set[str]:
    if not LIST.exists():
        return set()
    return {line.strip() for line in LIST.read_text(encoding="utf-8").splitlines() if line.strip() and line[0] != "#"}


def main() -> int:
    ids = existing() | slow_ids(sys.stdin.read())
    LIST.write_text(HEADER + "".join(f"{i}\n" for i in sorted(ids)), encoding="utf-8")
    print(f"{len(ids)} tests in {LIST.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
