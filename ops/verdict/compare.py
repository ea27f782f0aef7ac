"""``weakspot compare A B``: two audited targets on the same data side by side (a model and its repaired copy, a
candidate and production): accuracy, each method's headline figures, the weak spots shared, fixed and new, and both
robustness curves; written to ``reports/compare-A-B.html`` and ``reports/compare-A-B.json``.

Caveats first:

* It reads what the last audit wrote (``metrics/``, ``plots/``, ``findings/``), only where dvc.yaml declares it (the
  audit's manifest, :mod:`tasks.manifest`: a removed method's files are no part of the audit); it computes nothing
  new, so both targets must have been audited (``weakspot audit`` with both in params.yaml). It refuses two targets not judged
  on the same held-out rows (their prepared test splits differ): their numbers would not be comparable.
* A weak spot is matched across the two targets by its method, kind and what it names (a class, a class pair, a
  region's text): "fixed" is confirmed on A and not on B, "new" the other way round, among the methods that ran on
  both (a method restricted away from one target fixes nothing). Only weak spots confirmed on
  held-out inputs against their control (after the correction over every candidate of its target) count; each keeps
  its lift and interval.
* A method's headline figures are its section's key metrics (the cards of the report).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from tasks.manifest import Manifest, read_manifest
from weakspot.errors import ConfigError
from weakspot.io import write_json, write_text

Key = Tuple[str, str, str]


def _json(path: Path, manifest: Manifest) -> Optional[Dict[str, Any]]:
    return json.loads(path.read_text()) if path.is_file() and manifest.declares(path) else None


def _spots(spots: List[Dict[str, Any]], t: str) -> Dict[Key, Dict[str, Any]]:
    """Target ``t``'s confirmed weak spots (:func:`ops.verdict.gates.confirmed_weak_spots`) keyed by method, kind and what
    they name."""
    out: Dict[Key, Dict[str, Any]] = {}
    for r in spots:
        if r["target"] == t:
            what = f"{r['label']}->{r['prediction']}" if r["kind"] in ("class", "class_pair") else r["weak_spot"]
            out[(r["method"], r["kind"], what)] = {
                k: r[k] for k in ("method", "weak_spot", "lift", "lift_lo", "lift_hi")
            }
    return out


def _methods(m: Manifest, a: str, b: str) -> List[Dict[str, Any]]:
    rows = []
    root = m.root
    for d in sorted(p for p in (root / "metrics").iterdir() if p.is_dir() and p.name not in ("prepare", "train")):
        ma, mb = _json(d / f"{a}.json", m), _json(d / f"{b}.json", m)
        if ma is None or mb is None:
            continue
        sec = _json(root / "plots" / d.name / a / "section.json", m) or {}
        keys = [k for k in sec.get("key_metrics") or [] if k in ma or k in mb] or [
            k for k, v in ma.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
        ][:6]
        rows.append(
            {
                "method": d.name,
                "title": str(sec.get("title", d.name)).split(" (")[0],
                "figures": [{"metric": k, "a": ma.get(k), "b": mb.get(k)} for k in keys],
            }
        )
    return rows


def _curve(m: Manifest, t: str) -> Optional[Dict[str, List[float]]]:
    import pandas as pd

    f = m.root / "plots" / "robustness" / t / "curve.csv"
    if not f.is_file() or not m.declares(f):
        return None
    df = pd.read_csv(f)
    return {
        c: [float(v) for v in df[c]]
        for c in df.columns
        if c in ("eps", "eps (data units)", "clean", "pgd", "pgd lo", "pgd hi", "autoattack")
    }


def _check_same_rows(m: Manifest, a: str, b: str, targets: Dict[str, Any]) -> Optional[int]:
    """Both targets judged on the same held-out rows: their prepared test splits hold the same values (the data spec
    alone is not enough: a model you bring is judged on every row of a ``source``, a model weakspot trains on its
    split's test part)."""
    import pandas as pd

    files = [m.root / "data" / "targets" / t / "prepared" / "test.parquet" for t in (a, b)]
    if not all(f.is_file() and m.declares(f) for f in files):
        if targets[a].get("data") != targets[b].get("data"):
            raise ConfigError(
                f"{a} and {b} are not on the same data ({targets[a].get('data')} vs "
                f"{targets[b].get('data')}): their numbers are not comparable"
            )
        return None
    ta, tb = (pd.read_parquet(f) for f in files)
    if ta.shape != tb.shape or not ta.reset_index(drop=True).equals(tb.reset_index(drop=True)):
        raise ConfigError(
            f"{a} and {b} are not judged on the same held-out rows ({len(ta)} and {len(tb)} test rows "
            "that differ): their numbers are not comparable. A model you bring is judged on every row "
            "of a data source; give it the other target's split as named parts (train/val/test)"
        )
    return int(len(ta))


def compare_targets(
    a: str, b: str, root: "str | Path" = ".", params: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    """Everything the side-by-side report shows, as plain data (JSON-ready)."""
    from weakspot.config import read_yaml

    root = Path(root)
    raw = params if params is not None else read_yaml(root / "params.yaml")
    targets = raw.get("targets") or {}
    for t in (a, b):
        if t not in targets:
            raise ConfigError(f"no target {t!r} in params.yaml; targets: {', '.join(targets)}")
    m = read_manifest(root)
    root = m.root
    n_test = _check_same_rows(m, a, b, targets)
    acc = {t: (_json(root / "metrics" / "train" / f"{t}.json", m) or {}).get("test_accuracy") for t in (a, b)}
    if any(v is None for v in acc.values()):
        missing = [t for t, v in acc.items() if v is None]
        raise ConfigError(f"no audit of {', '.join(missing)} yet (metrics/train/<t>.json): run `weakspot audit`")
    from ops.verdict.gates import confirmed_weak_spots

    spots = confirmed_weak_spots(root)
    sa, sb = _spots(spots, a), _spots(spots, b)
    both = {f.stem for f in m.files(f"findings/{a}", "*.parquet")} & {
        f.stem for f in m.files(f"findings/{b}", "*.parquet")
    }
    sa, sb = ({k: v for k, v in s_.items() if k[0] in both} for s_ in (sa, sb))  # a method that ran on both only
    n = (_json(root / "metrics" / "train" / f"{a}.json", m) or {}).get("n_test")
    return {
        "a": a,
        "b": b,
        "data": targets[a].get("data"),
        "n_test": n_test or n,
        "accuracy": acc,
        "methods": _methods(m, a, b),
        "shared": [{"a": sa[k], "b": sb[k]} for k in sa if k in sb],
        "fixed": [sa[k] for k in sa if k not in sb],
        "new": [sb[k] for k in sb if k not in sa],
        "curves": {t: _curve(m, t) for t in (a, b)},
    }


def curve_png(cmp: Dict[str, Any]) -> Optional[bytes]:
    """Both robustness curves on one figure (PNG bytes), or None when neither target has one."""
    import io

    curves = {t: c for t, c in cmp["curves"].items() if c}
    if not curves:
        return None
    from weakspot.plotting import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for t, c in curves.items():
        (line,) = ax.plot(c["eps (data units)"], c["pgd"], marker="o", label=f"{t}: PGD")
        ax.fill_between(c["eps (data units)"], c["pgd lo"], c["pgd hi"], alpha=0.2, color=line.get_color())
    ax.set(xlabel="L-inf eps (data units)", ylabel="accuracy", ylim=(0, 1.02), title="Robustness curves")
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def write_comparison(a: str, b: str, root: "str | Path" = ".", out_dir: "str | Path" = "reports") -> Path:
    """Write ``compare-A-B.html`` and ``.json`` into ``out_dir``; the HTML's path."""
    from weakspot.report.html import compare_html

    cmp = compare_targets(a, b, root)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / f"compare-{a}-{b}.json", cmp)
    page = out / f"compare-{a}-{b}.html"
    write_text(page, compare_html(cmp, curve_png(cmp)))
    return page
