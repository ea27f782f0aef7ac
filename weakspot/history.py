"""Audit history: every successful audit's metrics kept in a local store, and the new audit compared with the
previous one by rules in params.yaml, so a nightly run says what got worse.

Caveats first: an audit is identified by its time (UTC), the git revision of the code and the sha256 of dvc.lock
(which pins every input, param and output). The store is a directory of Parquet files, one per audit
(``<dir>/<audit_id>.parquet``) with :data:`SCHEMA`; a number is kept as ``value`` (float), anything else (a list of
class pairs, a name) as JSON in ``text``. A rule names metrics by ``"<stage>/<target>:<dotted.key>"`` with shell
wildcards (``"train/*:test_accuracy"``), says which way is worse and by how much a move counts (absolute, or
relative to the previous value); ``worse: new`` flags list items that were not there before (a new class pair
among the corner cases). A metric that is missing in either audit is reported as such, never as a regression.

    history:
      dir: history
      rules:
        - {metric: "train/*:test_accuracy", worse: down, tolerance: 0.01}
        - {metric: "gad/*:*.sdr", worse: up, tolerance: 0.2, relative: true}
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import json
import math
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

from weakspot.config import HistoryParams, RuleParams  # noqa: F401  (the params section lives with the others)
from weakspot.errors import DataError
from weakspot.lineage import flatten

#: Columns of a history file, one row per metric value of one audit.
SCHEMA = {"audit_id": "string", "time": "string (ISO 8601, UTC)", "git_rev": "string", "git_dirty": "bool",
          "lock_sha256": "string", "metric": "string: <stage>/<target>:<dotted.key>", "value": "float64 or NaN",
          "text": "string: JSON of a value that is not a number, else empty"}


def snapshot(root: "str | Path" = ".") -> Dict[str, Any]:
    """Every metric of the audit in ``root/metrics`` as ``{"<stage>/<target>:<key>": value}``."""
    root = Path(root)
    out: Dict[str, Any] = {}
    for f in sorted((root / "metrics").rglob("*.json")):
        name = f.relative_to(root / "metrics").with_suffix("").as_posix()
        try:
            out.update({f"{name}:{k}": v for k, v in flatten(json.loads(f.read_text())).items()})
        except (OSError, ValueError) as e:
            raise DataError(f"{f}: not readable as JSON ({e}); rerun its stage") from None
    return out


def audit_identity(root: "str | Path" = ".") -> Dict[str, Any]:
    root = Path(root)
    lock = root / "dvc.lock"
    lock_sha = hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else ""

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    rev = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"audit_id": f"{now:%Y%m%dT%H%M%SZ}-{(rev or 'nogit')[:8]}-{lock_sha[:8]}",
            "time": now.isoformat(timespec="seconds"), "git_rev": rev, "git_dirty": dirty, "lock_sha256": lock_sha}


def record(root: "str | Path" = ".", store: "str | Path" = "history") -> Dict[str, Any]:
    """Write this audit's metrics to the store; returns its identity (with ``"file"``)."""
    import pandas as pd

    from weakspot.io import write_parquet

    root = Path(root)
    ident = audit_identity(root)
    rows = []
    for k, v in snapshot(root).items():
        num = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
        rows.append({**ident, "metric": k, "value": float(v) if num else float("nan"),
                     "text": "" if num else json.dumps(v)})
    f = Path(root) / store / f"{ident['audit_id']}.parquet"
    n = 1
    while f.exists():  # two audits within one second: keep both
        n += 1
        ident["audit_id"] = f"{ident['audit_id'].rsplit('~', 1)[0]}~{n}"
        f = Path(root) / store / f"{ident['audit_id']}.parquet"
        for r in rows:
            r["audit_id"] = ident["audit_id"]
    write_parquet(f, pd.DataFrame(rows, columns=list(SCHEMA)))
    return {**ident, "file": str(f)}


def audits(root: "str | Path" = ".", store: "str | Path" = "history") -> List[Path]:
    """The store's audit files, oldest first."""
    d = Path(root) / store
    return sorted(d.glob("*.parquet")) if d.is_dir() else []


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


def compare(before: Dict[str, Any], after: Dict[str, Any], rules: List[RuleParams]) -> List[Dict[str, Any]]:
    """One row per (rule, metric) the rules match in either audit: before, after, change and whether it regressed."""
    rows = []
    for r in rules:
        names = sorted({m for m in (*before, *after) if fnmatch.fnmatchcase(m, r.metric)})
        for m in names:
            b, a = before.get(m), after.get(m)
            row = {"metric": m, "rule": f"{r.worse}" + (f" > {r.tolerance:g}" + (" (relative)" if r.relative else "")
                                                       if r.worse != "new" else ""),
                   "before": b, "after": a, "change": None, "regression": False, "note": ""}
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
    head = (f"Since the last audit ({prev_id}): {len(bad)} regression(s) among {len(rows)} watched metric(s)"
            if prev_id else f"First audit in the history ({new_id}): nothing to compare with yet")
    lines = [head]
    for r in bad + [r for r in rows if not r["regression"] and r["note"]]:
        mark = "REGRESSION" if r["regression"] else r["note"]
        lines.append(f"  {mark}: {r['metric']}  {json.dumps(r['before'])} -> {json.dumps(r['after'])}  ({r['rule']})")
    return "\n".join(lines)
