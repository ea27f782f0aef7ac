"""The operations tests' tiny audit (one tabular target: prepare, train, weak segments, GAD, the report) on workers,
as test_worker_killed.py runs it (``--in-checkout``: its stages in the checkout, as the tests' shared tiny audit), or
with ``--smoke`` the pipeline tests' smoke audit (every target and method, the toy plug-in included; in the
checkout, as the tests run it), timed end to end: each line of `weakspot audit`'s output stamped with the seconds
since it started, and, with ``--cpu``, the CPU seconds of every process it started (sampled from /proc every 0.2 s;
Linux only).

    python benchmarks/bench_tiny_audit.py /tmp/tiny [--cpu] [--smoke | --in-checkout]

``DIR`` must not exist: a copy of this checkout is made there (as the tests make theirs) with the tiny or the
smoke params. The figures are in docs/results/test-suite.md.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _sample(stop: threading.Event, seen: dict, every: float = 0.2) -> None:
    """Every process's (command line, working folder, CPU seconds) into ``seen``, every ``every`` seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    while not stop.is_set():
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                cmd = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").strip()
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if cmd:
                seen[(pid, stat[19])] = (cmd, cwd, (int(stat[11]) + int(stat[12])) / tick)
        stop.wait(every)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--cpu", action="store_true", help="CPU seconds per process kind")
    ap.add_argument("--smoke", action="store_true", help="the smoke audit of tests/test_pipeline.py instead")
    ap.add_argument("--in-checkout", action="store_true", help="the tiny audit's stages in the checkout")
    args = ap.parse_args()
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]
    import conftest

    args.dir.mkdir(parents=True)
    if args.smoke:
        import test_pipeline

        repo = test_pipeline.smoke_with_toy(args.dir)
    else:
        repo = conftest.write_tiny_params(conftest.Repo(conftest._copy_repo(args.dir)))
        if args.in_checkout:
            repo.set_params(execution={"in_checkout": True})
    seen: dict = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(stop, seen), daemon=True)
    if args.cpu:
        sampler.start()
    t0 = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ops.cli", "audit"],
        cwd=repo.path,
        env=repo.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        print(f"{time.time() - t0:7.1f} {line}", end="", flush=True)
    rc = proc.wait()
    print(f"{'smoke' if args.smoke else 'tiny'} audit: exit {rc} in {time.time() - t0:.1f} s")
    if args.cpu:
        stop.set()
        sampler.join()
        kinds: dict = collections.defaultdict(float)
        for cmd, _, cpu in seen.values():
            if str(args.dir) in cmd or "ops.cli" in cmd or any(k in cmd for k in ("prefect", "dvc", "flows.")):
                kinds[re.sub(r"/\S+/", "", re.sub(r"\s--name\s\S+|\b[0-9a-f]{12,}\b|\d{4,}", "", cmd))[:100]] += cpu
        for kind, cpu in sorted(kinds.items(), key=lambda kv: -kv[1]):
            print(f"{cpu:7.1f} s CPU  {kind}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
