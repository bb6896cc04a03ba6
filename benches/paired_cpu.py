#!/usr/bin/env python3
"""Compare each paired row's p50 ratio with its all-CPU ratio.

Reads the "1b. Paired with the floor" tables of one or more `runtimes` bench outputs (a log
of `cargo bench -p redlease-benches --bench runtimes -- ...` or docs/benchmarks.md) and
prints, per row, the p50 ratio, (client + server CPU) ÷ the floor's, and their difference;
then the mean, spread and range of the difference over the rows kept.

    python3 benches/paired_cpu.py LOG [LOG ...] [--skip WORD,WORD]

--skip leaves out the rows whose subject contains one of the words (e.g. -all,async-std).
"""

import statistics
import sys


def micros(cell):
    cell = cell.strip()
    for unit, scale in (("µs", 1.0), ("ms", 1000.0), ("s", 1e6)):
        if cell.endswith(unit):
            return float(cell[: -len(unit)]) * scale
    raise ValueError(cell)


def rows(path):
    """The paired rows of one file: (subject, p50 ratio, all-CPU ratio)."""
    in_paired = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                in_paired = line.startswith("## 1b.")
                continue
            if not in_paired or not line.startswith("| ") or "cycle p50" in line:
                continue
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            try:
                p50, p50_floor = micros(c[3]), micros(c[4])
                srv, srv_floor = micros(c[7]), micros(c[8])
                cli, cli_floor = micros(c[10]), micros(c[11])
            except (IndexError, ValueError):
                continue
            yield c[0], p50 / p50_floor, (srv + cli) / (srv_floor + cli_floor)


def main(argv):
    skip = []
    paths = []
    args = iter(argv)
    for a in args:
        if a == "--skip":
            skip = [w for w in next(args, "").split(",") if w]
        else:
            paths.append(a)
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    diffs = []
    for path in paths:
        for subject, p50, cpu in rows(path):
            if any(w in subject for w in skip):
                continue
            diffs.append(p50 - cpu)
            print(f"{path}: {subject:<18} p50 ÷ floor {p50:.3f}  all CPU ÷ floor {cpu:.3f}  difference {p50 - cpu:+.3f}")
    if not diffs:
        print("no paired rows found", file=sys.stderr)
        return 1
    print(
        f"{len(diffs)} rows: difference mean {statistics.mean(diffs):+.4f}, "
        f"standard deviation {statistics.pstdev(diffs):.4f}, range {min(diffs):+.3f} to {max(diffs):+.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
