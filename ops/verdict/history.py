"""Audit history: every successful audit's metrics kept in a local store, and the new audit compared with the
previous one by rules in params.yaml, so a nightly run says what got worse.

Caveats first: an audit is identified by its time (UTC), the git revision of the code and the sha256 of dvc.lock
(which pins every input, param and output). The store is a directory of Parquet files, one per audit
(``<dir>/<audit_id>.parquet``) with :data:`SCHEMA`; a number is kept as ``value`` (float), anything else (a list of
class pairs, a name) as JSON in ``text``. A rule names metrics by ``"<stage>/<target>:<dotted.key>"`` with shell
wildcards (``"train/*:test_accuracy"``), says which way is worse and by how much a move counts (absolute, or
relative to the previous value); ``worse: new`` flags list items that were not there before (a new class pair
among the corner cases). A metric that is missing in either audit is reported as such, never as a regression.
An audit's metrics are those of the stages dvc.yaml declares (the audit's manifest, :mod:`tasks.manifest`); a past
audit's metric of a stage it no longer has (a removed target or method) is left out of the comparison and the trend.

    history:
      dir: history
      rules:
        - {metric: "train/*:test_accuracy", worse: down, tolerance: 0.01}
        - {metric: "gad/*:*.sdr.gad", exclude: "*.per_seed.*", worse: up, tolerance: 0.2, relative: true}
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import math
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

from tasks import paths
from tasks.manifest import Manifest, read_manifest
from weakspot.errors import DataError
from weakspot.hashing import sha256_file

from ops.provenance.lineage import flatten
from tasks.settings import RuleParams  # and the history section, registered

#: Columns of a history file, one row per metric value of one audit.
SCHEMA = {
    "audit_id": "string",
    "time": "string (ISO 8601, UTC)",
    "git_rev": "string",
    "git_dirty": "bool",
    "lock_sha256": "string",
    "metric": "string: <stage>/<target>:<dotted.key>",
    "value": "float64 or NaN",
    "text": "string: JSON of a value that is not a number, else empty",
}


def snapshot(root: "str | Path" = ".") -> Dict[str, Any]:
    """Every metric of the audit as ``{"<stage>/<target>:<key>": value}``: for each stage's file in ``root/metrics``
    that root/dvc.yaml declares (the audit's manifest, :mod:`tasks.manifest`: a stage it no longer has is no part of
    the audit) its headline, or the results file beside its report section (``plots/<stage>/<target>/results.json``,
    every metric) where there is one, so rules and gates may watch any detail."""
    manifest = read_manifest(root)
    root = manifest.root
    out: Dict[str, Any] = {}
    for m in manifest.files(paths.METRICS, "**/*.json"):
        name = m.relative_to(root / "metrics").with_suffix("").as_posix()
        f = root / paths.results_for(m.relative_to(root))
        f = f if f.is_file() and manifest.declares(f.relative_to(root)) else m
        try:
            out.update({f"{name}:{k}": v for k, v in flatten(json.loads(f.read_text())).items()})
        except (OSError, ValueError) as e:
            raise DataError(f"{f}: not readable as JSON ({e}); rerun its stage") from None
    return out


def today(metrics: Dict[str, Any], manifest: Manifest) -> Dict[str, Any]:
    """The metrics (``{"<stage>/<target>:<key>": value}``, a past audit's) of the stages ``manifest`` declares:
    what a comparison with today's audit may name (a removed target's metrics are not "missing in the new audit")."""
    return {k: v for k, v in metrics.items() if manifest.declares(paths.METRICS / f"{k.split(':', 1)[0]}.json")}


def audit_identity(root: "str | Path" = ".") -> Dict[str, Any]:
    root = Path(root)
    lock = root / "dvc.lock"
    lock_sha = sha256_file(lock) if lock.is_file() else ""

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    rev = git("rev-parse", "HEAD")
    # only changes to the code and shipped data make an audit unreproducible from its revision (tasks.paths.NOT_CODE)
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", ".", *paths.NOT_CODE))
    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "audit_id": f"{now:%Y%m%dT%H%M%SZ}-{(rev or 'nogit')[:8]}-{lock_sha[:8]}",
        "time": now.isoformat(timespec="seconds"),
        "git_rev": rev,
        "git_dirty": dirty,
        "lock_sha256": lock_sha,
    }


def record(root: "str | Path" = ".", store: "str | Path" = "history") -> Dict[str, Any]:
    """Write this audit's metrics to the store; returns its identity (with ``"file"``)."""
    import pandas as pd

    from weakspot.io import write_bytes, write_parquet

    root = Path(root)
    ident = audit_identity(root)
    rows = []
    for k, v in snapshot(root).items():
        num = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
        rows.append(
            {**ident, "metric": k, "value": float(v) if num else float("nan"), "text": "" if num else json.dumps(v)}
        )
    f = Path(root) / store / f"{ident['audit_id']}.parquet"
    n = 1
    while f.exists():  # two audits within one second: keep both
        n += 1
        ident["audit_id"] = f"{ident['audit_id'].rsplit('~', 1)[0]}~{n}"
        f = Path(root) / store / f"{ident['audit_id']}.parquet"
        for r in rows:
            r["audit_id"] = ident["audit_id"]
    write_parquet(f, pd.DataFrame(rows, columns=list(SCHEMA)))
    # what `weakspot rerun` needs besides the code at git_rev: the params that ran and the lock (every input,
    # param and output hash), beside the audit's metrics
    for name, suffix in (("params.yaml", ".params.yaml"), ("dvc.lock", ".dvc.lock")):
        if (root / name).is_file():
            write_bytes(f.with_suffix(suffix), (root / name).read_bytes())
    return {**ident, "file": str(f)}


def find_audit(root: "str | Path", store: "str | Path", audit_id: str) -> Dict[str, Any]:
    """The recorded audit whose id is ``audit_id`` (or starts with it, or ``last``): its identity and files."""
    files = audits(root, store)
    if not files:
        raise DataError(f"no audits recorded in {Path(root) / store}: `weakspot audit` records each one")
    if audit_id in ("last", "latest"):
        hits = [files[-1]]
    else:
        hits = [f for f in files if f.stem == audit_id] or [f for f in files if f.stem.startswith(audit_id)]
    if len(hits) != 1:
        near = ", ".join(f.stem for f in files[-5:])
        raise DataError(
            f"audit {audit_id!r} {'is ambiguous' if hits else 'not found'} in {Path(root) / store}; "
            f"recent audits: {near}"
        )
    f = hits[0]
    import pandas as pd

    head = pd.read_parquet(f, columns=["audit_id", "time", "git_rev", "git_dirty", "lock_sha256"]).head(1)
    ident = head.iloc[0].to_dict() if len(head) else {"audit_id": f.stem}
    ident["git_dirty"] = bool(ident.get("git_dirty", False))
    return {
        **ident,
        "file": str(f),
        "params": str(f.with_suffix(".params.yaml")),
        "lock": str(f.with_suffix(".dvc.lock")),
    }


def audits(root: "str | Path" = ".", store: "str | Path" = "history") -> List[Path]:
    """The store's audit files, oldest first (ids start with the UTC time)."""
    d = Path(root) / store
    return sorted(f for f in d.glob("*.parquet") if not f.name.startswith(".")) if d.is_dir() else []


def load(path: Path) -> Dict[str, Any]:
    import pandas as pd

    df = pd.read_parquet(path)
    out: Dict[str, Any] = {}
    for m, v, t in zip(df["metric"], df["value"], df["text"]):
        out[m] = json.loads(t) if t else float(v)
    return out


def _items(v: Any) -> set:
    if isinstance(v, list):
        return {json.dumps(x[:2] if isinstance(x, list) and len(x) > 2 else x) for x in v}
    return set()


def _watched(metric: str, rule: RuleParams) -> bool:
    return fnmatch.fnmatchcase(metric, rule.metric) and not (rule.exclude and fnmatch.fnmatchcase(metric, rule.exclude))


def compare(before: Dict[str, Any], after: Dict[str, Any], rules: List[RuleParams]) -> List[Dict[str, Any]]:
    """One row per (rule, metric) the rules match in either audit: before, after, change and whether it regressed."""
    rows = []
    for r in rules:
        names = sorted({m for m in (*before, *after) if _watched(m, r)})
        for m in names:
            b, a = before.get(m), after.get(m)
            row = {
                "metric": m,
                "rule": f"{r.worse}"
                + (f" > {r.tolerance:g}" + (" (relative)" if r.relative else "") if r.worse != "new" else ""),
                "before": b,
                "after": a,
                "change": None,
                "regression": False,
                "note": "",
            }
            if b is None or a is None:
                row["note"] = "new metric" if b is None else "missing in the new audit"
            elif r.worse == "new":
                new = sorted(_items(a) - _items(b))
                row["change"] = [json.loads(x) for x in new]
                row["regression"] = bool(new)
            elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isfinite(a) and math.isfinite(b):
                delta = float(a) - float(b)
                row["change"] = delta
                size = abs(delta) / abs(b) if r.relative and b != 0 else abs(delta)
                wrong_way = delta < 0 if r.worse == "down" else delta > 0
                row["regression"] = bool(wrong_way and size > r.tolerance)
            else:
                row["note"] = "not a number"
            rows.append(row)
    return rows


def format_comparison(rows: List[Dict[str, Any]], prev_id: Optional[str], new_id: str) -> str:
    bad = [r for r in rows if r["regression"]]
    head = (
        f"Since the last audit ({prev_id}): {len(bad)} regression(s) among {len(rows)} watched metric(s)"
        if prev_id
        else f"First audit in the history ({new_id}): nothing to compare with yet"
    )
    lines = [head]
    for r in bad + [r for r in rows if not r["regression"] and r["note"]]:
        mark = "REGRESSION" if r["regression"] else r["note"]
        lines.append(f"  {mark}: {r['metric']}  {json.dumps(r['before'])} -> {json.dumps(r['after'])}  ({r['rule']})")
    return "\n".join(lines)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return (math.isnan(a) and math.isnan(b)) if (math.isnan(a) or math.isnan(b)) else float(a) == float(b)
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def since_last(
    root: "str | Path", store: "str | Path", rules: List[RuleParams], max_audits: int = 30
) -> Dict[str, Any]:
    """What the report's "Since the last audit" section shows, from the store and the metrics now in ``root``.

    When the latest recorded audit holds exactly the metrics now in ``metrics/`` (``weakspot audit`` records before
    it renders the report), that audit is "this audit" and it is compared with the one before it; otherwise the
    metrics come from an unrecorded run (``dvc repro`` by hand) and are compared with the latest recorded audit.
    ``trend`` maps each watched numeric metric to its values over the last ``max_audits`` audits (oldest first).
    """
    files = audits(root, store)
    now = snapshot(root)
    manifest = read_manifest(root)
    out: Dict[str, Any] = {
        "current": None,
        "previous": None,
        "rows": [],
        "trend": {},
        "times": [],
        "n_audits": len(files),
        "recorded": False,
    }
    if not files:
        return out
    last = load(files[-1])
    recorded = set(last) == set(now) and all(_same(last[k], now[k]) for k in now)
    # past audits as far as today's stages go: a removed target or method is no part of the comparison or the trend
    if recorded:
        out.update(current=files[-1].stem, recorded=True)
        if len(files) > 1:
            out.update(previous=files[-2].stem, rows=compare(today(load(files[-2]), manifest), last, rules))
        series_files = files[-max_audits:]
        loaded = [today(load(f), manifest) for f in series_files]
        ids = [f.stem for f in series_files]
    else:
        out.update(previous=files[-1].stem, rows=compare(today(last, manifest), now, rules))
        series_files = files[-(max_audits - 1) :]
        loaded = [today(load(f), manifest) for f in series_files] + [now]
        ids = [f.stem for f in series_files] + ["this run (not recorded)"]
    out["times"] = ids
    watched = sorted({m for r in rules if r.worse != "new" for d in loaded for m in d if _watched(m, r)})
    for m in watched:
        vals = [d.get(m) for d in loaded]
        if any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            out["trend"][m] = [
                float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in vals
            ]
    return out
