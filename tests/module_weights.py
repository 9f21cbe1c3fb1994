"""Write tests/module_weights.txt from a pytest ``--durations=0`` report: seconds per test module (setup,
call and teardown of its tests summed), heaviest first. The parallel runs start with these modules.

    .venv/bin/python -m tests.module_weights var/unit-durations.log [var/browser-durations.log ...]
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^\s*([\d.]+)s (?:setup|call|teardown)\s+(\S+?\.py)::")
KEEP_SECONDS = 2.0  # below this a module's place in the order makes no difference


def weights(reports: list[str]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for report in reports:
        for line in report.splitlines():
            match = LINE.match(line)
            if match:
                totals[match.group(2)] += float(match.group(1))
    return dict(totals)


def main(paths: list[str]) -> None:
    totals = weights([Path(p).read_text(errors="replace") for p in paths])
    lines = ["# seconds per test module, heaviest first (python -m tests.module_weights, tests/parallel.py)"]
    lines += [f"{s:.1f} {m}" for m, s in sorted(totals.items(), key=lambda kv: -kv[1]) if s >= KEEP_SECONDS]
    out = Path(__file__).with_name("module_weights.txt")
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {len(lines) - 1} modules")


if __name__ == "__main__":
    main(sys.argv[1:])
