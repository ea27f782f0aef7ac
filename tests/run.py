"""`make test`: the unit tests, the end-to-end pipeline tests (marked ``slow``) and the operations tests (marked
``ops``: a tiny audited repository run, killed, rerun, scheduled) in three pytest processes at once.

The pipeline and operations tests are subprocesses that mostly wait (Prefect, DVC, one stage at a time), so on this
project's 2-core machine running them beside the unit tests cuts the wall time. The outputs are printed in full,
then one closing line with the combined counts; the exit code is non-zero if any run failed.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _counts(text: str) -> dict:
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", tail)}


def main(argv: list) -> int:
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *argv]
    tmp = Path(tempfile.mkdtemp(prefix="weakspot-tests-"))  # one temp root each: the runs never share a folder
    groups = [
        ("pipeline tests (-m 'slow and not ops')", "slow and not ops", "slow"),
        ("operations tests (-m ops)", "ops", "ops"),
    ]
    outs, procs = [], []
    for _, marker, name in groups:
        out = tempfile.TemporaryFile("w+")
        procs.append(
            subprocess.Popen(
                base + ["-m", marker, f"--basetemp={tmp / name}"],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
        outs.append(out)
    fast = subprocess.run(
        base + ["-m", "not slow and not ops", f"--basetemp={tmp / 'unit'}"], cwd=ROOT, capture_output=True, text=True
    )
    texts = []
    for p, out in zip(procs, outs):
        p.wait()
        out.seek(0)
        texts.append(out.read())
        out.close()
    print("== unit tests (-m 'not slow and not ops')\n" + fast.stdout + fast.stderr, flush=True)
    for (title, _, _), text in zip(groups, texts):
        print(f"== {title}\n" + text, flush=True)
    total = {}
    for c in [_counts(fast.stdout)] + [_counts(t) for t in texts]:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    failed = total.get("failed", 0) + total.get("error", 0) + total.get("errors", 0)
    ok = fast.returncode in (0, 5) and all(p.returncode in (0, 5) for p in procs) and total.get("passed", 0) > 0
    if not ok and failed == 0:
        failed = 1  # a run that crashed without counting
    line = f"{total.get('passed', 0)} passed, {failed} failed"
    if total.get("skipped"):
        line += f", {total['skipped']} skipped"
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
