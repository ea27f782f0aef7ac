"""The audit's time estimate against the stage times audits measured: calibrate it, or check it.

Every audit on workers records each stage's seconds beside its estimate and its counted work in
``history/<audit>.stages.json`` (:mod:`ops.engine.estimate`). This reads those files of one or more audited
checkouts (their latest audit each, or every audit with ``--all``) and

* prints, per stage, the measured time, the estimate and their ratio (the goal: within a factor of 1.5 each way);
* with ``--fit``, fits each step's two coefficients (fixed seconds and seconds per unit of work, :func:`fit`) and
  writes ``ops/engine/costs.json`` with the audits it was fitted on, then prints the ratios the new coefficients
  give on the same stages (in-sample: check them on another audit).

    .venv/bin/python benchmarks/bench_estimate.py CHECKOUT [CHECKOUT ...] [--all] [--fit | --recount] [--out FILE]
        [--keys examine_study]

``--keys`` keeps only the stages of those cost keys; with ``--fit`` it refits them alone and keeps the other keys'
coefficients (a step measured in one audit, e.g. the examiner's study at ``depth: study``).

``--fit`` counts the work again (``--recount``): the coefficients always go with today's cost model.

The figures are in docs/results/audit-cost.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rows_of(checkout: Path, every: bool, recount: bool) -> list:
    """The recorded stages of ``checkout``'s latest audit (every audit with ``every``); with ``recount``, each
    stage's work counted again by today's cost model from the params that audit ran with (in the checkout, whose
    relative data paths they name)."""
    import os

    import yaml

    from ops.engine import estimate

    files = sorted((checkout / "history").glob("*.stages.json"))
    files = files if every else files[-1:]
    out = []
    for f in files:
        rows = {s: r for s, r in json.loads(f.read_text())["stages"].items() if r.get("seconds") is not None}
        if recount:
            params = yaml.safe_load(f.with_name(f.name.replace(".stages.json", ".params.yaml")).read_text())
            here = os.getcwd()
            os.chdir(checkout)
            sys.path.insert(0, str(checkout))  # a user's model module, as the stages import it
            try:
                works = estimate.stage_work(list(rows), params, int(params.get("threads") or 1))
            finally:
                os.chdir(here)
                sys.path.remove(str(checkout))
            for w in works:
                rows[w.stage].update(work=round(w.work, 4), counted=w.counted, key=w.key, estimate=round(w.seconds, 1))
        for stage, r in rows.items():
            out.append({**r, "stage": stage, "audit": f.name.split(".")[0], "checkout": str(checkout)})
    return out


def fit(rows: list) -> dict:
    """Each cost key's (fixed seconds, seconds per unit of work): non-negative least squares of the relative error
    over its stages (one stage: all of it per unit of work)."""
    import numpy as np
    from scipy.optimize import nnls

    from ops.engine import estimate

    by_key: dict = {}
    for r in rows:
        by_key.setdefault(r.get("key", r["step"]), []).append(r)
    out = {}
    for key, rs in sorted(by_key.items()):
        s = np.array([r["seconds"] for r in rs]) - estimate.OVERHEAD
        w = np.array([r["work"] for r in rs])
        if len(rs) < 2 or np.ptp(w) <= 0.05 * w.max():
            out[key] = (0.0, round(float(max(s.mean(), 0.0) / max(w.mean(), 1e-9)), 5))
            continue
        sol, _ = nnls(np.stack([1 / np.maximum(s, 1), w / np.maximum(s, 1)], 1), np.ones(len(rs)))
        out[key] = (round(float(sol[0]), 3), round(float(sol[1]), 5))
    return out


def main() -> int:
    from ops.engine import estimate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkouts", nargs="+", type=Path)
    ap.add_argument("--all", action="store_true", help="every recorded audit, not only the latest of each")
    ap.add_argument("--fit", action="store_true", help="fit the coefficients and write ops/engine/costs.json")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    ap.add_argument(
        "--keys", default="", help="with --fit: refit only these cost keys (comma-separated), keep the rest"
    )
    ap.add_argument(
        "--recount", action="store_true", help="count each stage's work again with today's cost model (and its params)"
    )
    args = ap.parse_args()
    rows = [r for c in args.checkouts for r in rows_of(c, args.all, args.recount or args.fit)]
    if not rows:
        raise SystemExit("no recorded stage times (history/*.stages.json): run `weakspot audit` on workers first")
    keys = [k for k in args.keys.split(",") if k]
    if keys:
        rows = [r for r in rows if r.get("key", r["step"]) in keys]
    if args.fit:
        coef = fit(rows)
        commit = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        costs = ROOT / "ops" / "engine" / "costs.json"
        old = json.loads(costs.read_text()) if keys and costs.is_file() else {"coefficients": {}, "audits": []}
        fitted = {k: {"fixed": a, "per_work": b} for k, (a, b) in coef.items()}
        audits = sorted({f"{r['checkout']}:{r['audit']}" for r in rows})
        costs.write_text(
            json.dumps(
                {
                    "fitted_by": "benchmarks/bench_estimate.py --fit" + (f" (then --keys {args.keys})" if keys else ""),
                    "commit": commit.stdout.strip() if not keys else old.get("commit"),
                    "audits": sorted(set(old.get("audits", [])) | set(audits)),
                    **({"refitted": {"keys": keys, "commit": commit.stdout.strip(), "audits": audits}} if keys else {}),
                    "overhead_s": estimate.OVERHEAD,
                    "coefficients": dict(sorted({**old["coefficients"], **fitted}.items())),
                },
                indent=1,
            )
            + "\n"
        )
        estimate.COSTS.update(coef)
    print(f"| stage | measured s | estimated s{' (refitted)' if args.fit else ''} | ratio | work counted |")
    print("|---|---:|---:|---:|---|")
    worst = 1.0
    for r in rows:
        est = estimate.seconds_of(r.get("key", r["step"]), r["work"]) if args.fit else r["estimate"]
        ratio = est / r["seconds"] if r["seconds"] else float("nan")
        r["checked_estimate"], r["ratio"] = round(est, 1), round(ratio, 3)
        worst = max(worst, ratio, 1 / ratio if ratio else 1.0)
        print(f"| {r['stage']} | {r['seconds']:.0f} | {est:.0f} | {ratio:.2f} | {r['counted']} |")
    within = sum(1 / 1.5 <= r["ratio"] <= 1.5 for r in rows)
    print(f"\n{within} of {len(rows)} stages within a factor of 1.5; the worst factor {worst:.2f}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
