"""Where the test suite's CPU goes, per test file and per test: reads the JSON lines that ``WEAKSPOT_TEST_CPU=FILE``
makes tests/conftest.py write (each test's CPU seconds: the pytest process's and those of the processes reaped
meanwhile, see tests/conftest.py; and its wall time), and, per pytest-xdist worker, how long it was busy and the
files it ran in the order it ran them (where the run's wall time goes: the worker that finishes last sets it).

    WEAKSPOT_TEST_CPU=/tmp/cpu.jsonl make test
    python benchmarks/suite_cpu.py /tmp/cpu.jsonl [--top 30]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    with open(args.file) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    by_file: dict = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = by_file[r["test"].split("::")[0]]
        f[0] += r["cpu"]
        f[1] += r["wall"]
        f[2] += 1
    total = sum(r["cpu"] for r in rows)
    print(f"{len(rows)} tests, {total:.0f} s of CPU in all (the pytest processes and the processes they reaped)")
    print(f"\n{'CPU s':>8} {'wall s':>8} {'tests':>5}  file")
    for name, (cpu, wall, n) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"{cpu:8.0f} {wall:8.0f} {n:5d}  {name}")
    timed = [r for r in rows if "start" in r]
    if timed:
        t0 = min(r["start"] for r in timed)
        print(f"\n{'ends s':>8} {'busy s':>8}  worker: its files in the order it ran them (wall s)")
        for w in sorted({r["worker"] for r in timed}):
            mine = sorted((r for r in timed if r["worker"] == w), key=lambda r: r["start"])
            runs: list = []
            for r in mine:
                name = r["test"].split("::")[0].replace("tests/", "")
                if runs and runs[-1][0] == name:
                    runs[-1][1] += r["wall"]
                else:
                    runs.append([name, r["wall"]])
            end = max(r["start"] + r["wall"] for r in mine) - t0
            shown = ", ".join(f"{n} ({s:.0f})" for n, s in runs if s >= 5)
            print(f"{end:8.0f} {sum(r['wall'] for r in mine):8.0f}  {w}: {shown}")
    print(f"\n{'CPU s':>8} {'wall s':>8}  test")
    for r in sorted(rows, key=lambda r: -r["cpu"])[: args.top]:
        print(f"{r['cpu']:8.0f} {r['wall']:8.0f}  {r['test']}")


if __name__ == "__main__":
    main()
