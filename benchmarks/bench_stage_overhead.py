"""A stage's overhead on a worker (issue 48): a segments stage on a 500-row table, end to end, CPU and wall, beside
its own computation.

A copy of ``--checkout`` (default: this one; pass an older commit's worktree for "before") gets one tabular target of
500 rows (Phoneme's first 500, an SVM, the weak-segments method only) and is audited on one local worker; then only
the segments stage's params change, and the second audit, which reruns that stage alone, is measured: every process
it starts is sampled from /proc every 0.1 s (Linux only) and sorted into

- the stage's computation: its command, ``python -m flows.method segments ...`` (imports included);
- the stage's overhead on the worker: the flow-run process Prefect's worker starts, git and DVC in the clone;
- the audit's own processes: ``weakspot audit``, its Prefect server, its DVC in the checkout, the report stage.

    python benchmarks/bench_stage_overhead.py /tmp/ovh [--checkout PATH] [--label after]

DIR must not exist. The figures are in docs/results/workers.md ("A stage's overhead").
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_tiny_audit import _sample  # noqa: E402  (every process's CPU from /proc)


def kind(cmd: str, cwd: str, work: str, repo: str) -> str:
    if "flows.method segments" in cmd:
        return "stage command (its computation)"
    if "prefect.engine" in cmd or "prefect flow-run execute" in cmd or "flow-run execute" in cmd:
        return "worker: flow-run process"
    if cwd.startswith(work) or work in cmd:
        return "worker: git and DVC in the clone"
    if "worker start" in cmd:
        return "worker: its polling process"
    if cwd.startswith(repo) or repo in cmd:
        return "audit: weakspot audit, its server, DVC in the checkout, the report"
    return ""


def copy_checkout(src: Path, dst: Path) -> None:
    """The tracked and new files of ``src``'s working tree, committed in a new repository at ``dst``."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=src,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    import shutil

    for f in files + [".dvc/config", ".dvc/.gitignore", ".dvcignore"]:
        if (src / f).is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / f, dst / f)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b"}
    env["GIT_COMMITTER_EMAIL"] = "b@b"
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "copy"]):
        subprocess.run(["git", *cmd], cwd=dst, check=True, env=env)


def params(repo: Path, min_size: int) -> None:
    import yaml

    p = repo / "params.yaml"
    raw = yaml.safe_load(p.read_text())
    raw["targets"] = {
        "table500": {
            "data": {"source": "csv:data/table500.csv", "label": "y"},
            "model": {"kind": "builtin", "arch": "svm_grid"},
            "train": {"seed": 0, "options": {"kernels": ["rbf"], "C": [1.0], "gamma": ["scale"], "cv": 2}},
            "methods": ["segments"],
        }
    }
    for section in raw.values():
        if isinstance(section, dict):
            section.pop("per_target", None)
    raw.pop("examine", None)
    raw["segments"]["min_rows"] = min_size
    raw["gates"] = {"fail": False, "conditions": []}
    raw["execution"].update({"workers": 1, "gpu_workers": 0, "in_checkout": False})
    p.write_text(yaml.safe_dump(raw, sort_keys=False))


def table(repo: Path) -> None:
    """Phoneme's first 500 rows (the KEEL file shipped with the project) as a CSV with a label column ``y``."""
    src = next((ROOT / "data").rglob("phoneme.dat"))
    rows = [ln.split(",") for ln in src.read_text().splitlines() if ln.strip() and not ln.startswith("@")][:500]
    with open(repo / "data/table500.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([f"f{i}" for i in range(len(rows[0]) - 1)] + ["y"])
        w.writerows([[c.strip() for c in r] for r in rows])


def audit(repo: Path, env: dict, work: str, measure: bool) -> dict:
    seen: dict = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(stop, seen, 0.1), daemon=True)
    if measure:
        sampler.start()
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "ops.cli", "audit"], cwd=repo, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    stop.set()
    if proc.returncode != 0:
        raise SystemExit(f"audit failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    out = {"wall_s": round(wall, 1), "log": proc.stdout}
    if measure:
        sampler.join()
        kinds: dict = collections.defaultdict(float)
        for cmd, cwd, cpu in seen.values():
            k = kind(cmd, cwd, work, str(repo))
            if k:
                kinds[k] += cpu
        out["cpu_s"] = {k: round(v, 2) for k, v in sorted(kinds.items())}
        done = [ln for ln in proc.stdout.splitlines() if ln.startswith("segments-table500: done in")]
        out["stage_wall_s"] = float(done[-1].split()[-2]) if done else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    ap.add_argument("--label", default="this checkout")
    args = ap.parse_args()
    repo = args.dir / "repo"
    repo.mkdir(parents=True)
    copy_checkout(args.checkout.resolve(), repo)
    table(repo)
    params(repo, 20)
    work = str(args.dir / "work")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "WEAKSPOT_"))},
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
        "PYTHONPATH": str(repo),
        "WEAKSPOT_ROOT": str(repo),
        "WEAKSPOT_WORKDIR": work,
    }
    first = audit(repo, env, work, measure=False)  # prepare, train, segments, report: the worker's clone made
    params(repo, 25)  # only the segments stage's params change
    second = audit(repo, env, work, measure=True)
    stage = second["cpu_s"].get("stage command (its computation)", 0.0)
    overhead = sum(v for k, v in second["cpu_s"].items() if k.startswith("worker: ") and "polling" not in k)
    result = {
        "label": args.label,
        "checkout": str(args.checkout),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short=7", "HEAD"], cwd=args.checkout, capture_output=True, text=True
        ).stdout.strip(),
        "first_audit_wall_s": first["wall_s"],
        "audit_wall_s": second["wall_s"],
        "stage_wall_s": second["stage_wall_s"],
        "cpu_s": second["cpu_s"],
        "stage_command_cpu_s": stage,
        "overhead_cpu_s": round(overhead, 2),
    }
    print(json.dumps(result, indent=1))
    (args.dir / "result.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
