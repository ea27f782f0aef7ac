"""`make test`: the unit tests and the end-to-end pipeline tests (marked ``slow``) in two pytest processes at once.

The pipeline tests are subprocesses that mostly wait on one core each (Prefect, DVC, one stage at a time), so on
this project's 2-core machine running them beside the unit tests halves the wall time. Both outputs are printed in
full, then one closing line with the combined counts; the exit code is non-zero if either run failed.
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
    tmp = Path(tempfile.mkdtemp(prefix="weakspot-tests-"))  # one temp root each: the two runs never share a folder
    with tempfile.TemporaryFile("w+") as slow_out:
        slow = subprocess.Popen(base + ["-m", "slow", f"--basetemp={tmp / 'slow'}"], cwd=ROOT, stdout=slow_out,
                                stderr=subprocess.STDOUT, text=True)
        fast = subprocess.run(base + ["-m", "not slow", f"--basetemp={tmp / 'unit'}"], cwd=ROOT, capture_output=True,
                              text=True)
        slow.wait()
        slow_out.seek(0)
        slow_text = slow_out.read()
    print("== unit tests (-m 'not slow')\n" + fast.stdout + fast.stderr, flush=True)
    print("== pipeline tests (-m slow)\n" + slow_text, flush=True)
    total = {}
    for c in (_counts(fast.stdout), _counts(slow_text)):
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    failed = total.get("failed", 0) + total.get("error", 0) + total.get("errors", 0)
    ok = fast.returncode in (0, 5) and slow.returncode in (0, 5) and (total.get("passed", 0) > 0)
    if not ok and failed == 0:
        failed = 1  # a run that crashed without counting
    line = f"{total.get('passed', 0)} passed, {failed} failed"
    if total.get("skipped"):
        line += f", {total['skipped']} skipped"
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
