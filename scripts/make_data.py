"""Write the small generated data files in data/ (deterministic: same seed, same bytes).

    python scripts/make_data.py          # rewrite them
    python scripts/make_data.py --check  # exit 1 if a committed file differs from what the code makes

data/dates-sample.tsv: 300 pairs of the date-translation task (human-readable -> ISO 8601) that
notebooks 7, 8 and 13 use, so the task can be read without running anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

from seqlab.data import make_dates

DATA = Path(__file__).resolve().parent.parent / "data"


def dates_sample() -> str:
    rows = ["source\ttarget\tformat"] + [f"{p.source}\t{p.target}\t{p.format}" for p in make_dates(300, seed=2026)]
    return "\n".join(rows) + "\n"


FILES = {"dates-sample.tsv": dates_sample}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, make in FILES.items():
        path, text = DATA / name, make()
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(DATA.parent)}")
    if stale:
        print(f"out of date: {stale}; run python scripts/make_data.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
