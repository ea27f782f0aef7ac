"""The report's data, ready for its templates: numbers as text, figures as data URIs, tables cut or transposed.

Caveat first: every value here is plain text (``str``), never markup; the templates escape it when they print it. This
module reads no files and knows no HTML: the report flow collects each stage's ``section.json``, figures (PNG bytes)
and tables, :mod:`weakspot.report.html` renders what this module prepares.

>>> number(0.000123456), number(12345.6), number(float("nan")), number(None), number("a<b")
('1.23e-04', '1.235e+04', 'NaN', 'None', 'a<b')
"""

from __future__ import annotations

import base64
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from weakspot.evidence import FDR
from weakspot.fmt import bound, fmt, interval

#: a table with more columns than this and at most TRANSPOSE_ROWS rows is shown transposed (one line per column)
TRANSPOSE_COLUMNS, TRANSPOSE_ROWS = 14, 8


def number(v: Any) -> str:
    """A table cell's or metric card's value: a float to 4 significant digits (``e`` notation below 1e-3), else
    ``str``."""
    if isinstance(v, float):
        if v != v:  # NaN
            return "NaN"
        return f"{v:.4g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"
    return str(v)


def png_src(png: Union[bytes, bytearray]) -> str:
    """``png`` as a ``data:`` URI, so the page shows it offline."""
    return "data:image/png;base64," + base64.b64encode(bytes(png)).decode("ascii")


def anchor(key: str) -> str:
    """The HTML id of a section keyed ``stage/target``."""
    return key.replace("/", "-")


def _row_labels(df: Any) -> List[str]:
    """Names for the rows of a transposed table: the leading columns' values, as few as tell the rows apart."""
    cols = list(df.columns)
    for k in range(1, min(3, len(cols)) + 1):
        labels = [" / ".join(number(v) for v in row) for row in df[cols[:k]].itertuples(index=False)]
        if len(set(labels)) == len(labels):
            return labels
    return [f"row {i + 1}" for i in range(len(df))]


def table(df: Any, max_rows: int) -> Dict[str, Any]:
    """A DataFrame as ``table.html`` shows it: ``transposed``, ``head`` and ``rows`` (text) and ``more`` (rows cut).

    A wide and short table (e.g. GAD's Table I, one row per seed) is transposed: one line per column reads better than
    a scroll bar. A long one keeps its first ``max_rows`` rows.
    """
    if len(df.columns) > TRANSPOSE_COLUMNS and 0 < len(df) <= min(TRANSPOSE_ROWS, max_rows):
        return {
            "transposed": True,
            "head": ["column", *_row_labels(df)],
            "more": 0,
            "rows": [[str(c), *(number(v) for v in df[c])] for c in df.columns],
        }
    shown = df.head(max_rows)
    return {
        "transposed": False,
        "head": [str(c) for c in shown.columns],
        "more": max(0, len(df) - max_rows),
        "rows": [[number(v) for v in row] for row in shown.itertuples(index=False)],
    }


def cards(metrics: Mapping[str, Any], keys: Any = None) -> List[tuple]:
    """Metric cards ``(value, name)``: the section's ``key_metrics`` in order, else its first eight scalar metrics."""
    items = [(k, metrics[k]) for k in keys if k in metrics] if keys else list(metrics.items())
    scalars = [(k, v) for k, v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return [(number(v), str(k)) for k, v in scalars[:8]]


def _row_tables(row: Mapping[str, Any]) -> List[List[tuple]]:
    """A finding's ``example`` and ``factors`` (JSON objects) as small key-value tables, eight pairs at most."""
    out = []
    for key in ("example", "factors"):
        raw = row.get(key) or ""
        if raw:
            try:
                values = json.loads(raw)
            except ValueError:
                values = None
            if isinstance(values, dict):
                out.append([(str(k), number(v)) for k, v in list(values.items())[:8]])
    return out


def finding(row: Mapping[str, Any]) -> Dict[str, Any]:
    """One row of a findings table (see :mod:`weakspot.findings`) as ``finding.html`` shows it."""
    img = row.get("image")
    conf = float(row.get("confidence", float("nan")))
    return {
        "image": png_src(img) if isinstance(img, (bytes, bytearray)) and img else "",
        "weak_spot": str(row.get("weak_spot", "")),
        "rank": int(row.get("rank", 0)),
        "severity": number(float(row.get("severity", float("nan")))),
        "prediction": str(row.get("prediction", "")) if row.get("prediction") else "",
        "confidence": number(conf) if row.get("prediction") and conf == conf else "",  # NaN: not measured
        "label": str(row.get("label") or ""),
        "tables": _row_tables(row),
        "confirmed": bool(row.get("confirmed", False)),
        "evidence": str(row.get("confirmation") or ""),
    }


def control_verdict(df: Any) -> Dict[str, str]:
    """What a method found on this target: ``{"kind": "found" | "clear" | "unchecked" | "none", "text"}`` (the first
    line of its card). ``clear``: it checked its candidates on held-out inputs and none failed more often than its
    control after the correction: it found no weak spot, which on a good model is the answer, not a failure."""
    if df is None or not len(df):
        return {"kind": "none", "text": ""}
    checked = df[df["n_confirm"] > 0] if "n_confirm" in df.columns else df.iloc[:0]
    n_ok = int(df["confirmed"].sum()) if "confirmed" in df.columns else 0
    if not len(checked):
        return {
            "kind": "unchecked",
            "text": f"Not checked against a control: its {len(df)} finding(s) are the "
            "search's own output, shown below as not confirmed.",
        }
    family = int(df["family"].max()) if "family" in df.columns and len(df) else len(checked)
    if n_ok:
        return {
            "kind": "found",
            "text": f"Found {n_ok} weak spot(s): {n_ok} of {len(checked)} candidate(s) checked on held-out "
            f"inputs failed more often than their control (at {FDR:.0%} false discovery rate over {family} "
            "candidates).",
        }
    return {
        "kind": "clear",
        "text": f"Found no weak spot: none of the {len(checked)} candidate(s) checked on held-out inputs failed "
        f"more often than its control, after the correction for {family} candidates.",
    }


def method_card(m: Mapping[str, Any], max_findings: int) -> Dict[str, Any]:
    """One method's card in a target's weak spots: why it did not run, that its findings are missing, or its top
    ``max_findings`` findings."""
    card = {
        "name": m.get("name", ""),
        "title": m["title"],
        "paper": m.get("paper", ""),
        "reason": m.get("reason") or "",
        "anchor": m.get("anchor") or "",
        "sample": m.get("sample") or "",
        "missing": False,
        "findings": [],
        "unconfirmed": [],
        "meaning": "",
        "count": 0,
        "control": {"kind": "none", "text": ""},
    }
    df = m.get("findings")
    if card["reason"]:
        return card
    if df is None:
        return {**card, "missing": True}
    ok = df["confirmed"].astype(bool) if "confirmed" in df.columns else np.zeros(len(df), bool)
    return {
        **card,
        "findings": [finding(r) for r in df[ok].head(max_findings).to_dict("records")],
        "unconfirmed": [finding(r) for r in df[~ok].head(max_findings).to_dict("records")],
        "meaning": df["severity_meaning"].iloc[0] if len(df) else "",
        "count": len(df),
        "n_unconfirmed": int((~ok).sum()),
        "control": control_verdict(df),
    }


def by_kind(spots: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Confirmed weak spots in one list per kind (:data:`weakspot.methods.FINDS`), each ranked on its own:
    ``[{"kind", "title", "spots"}]`` for the kinds that have any."""
    from weakspot.methods import FINDS

    return [
        {"kind": k, "title": title, "spots": mine, "forest": forest(mine)}
        for k, title in FINDS.items()
        for mine in [[s for s in spots if s["finds"] == k]]
        if mine
    ]


def forest(spots: List[Dict[str, Any]], width: int = 520, row: int = 20, left: int = 24) -> Dict[str, Any]:
    """A forest plot of confirmed weak spots, as numbers for an inline SVG (``weak_spots.html``): per spot its lift
    (a dot) from its adjusted lower bound to its upper bound (a line; an open end where it is unbounded), on a log
    axis with a line at 1 (no more failures than the control)."""
    import math

    his = [s["lift_hi"] for s in spots if math.isfinite(s["lift_hi"])]
    top = max([s["lift"] for s in spots] + his + [2.0]) * 1.3
    bottom = min([s["lift_lo_adjusted"] for s in spots if s["lift_lo_adjusted"] > 0] + [1.0]) / 1.3
    span = math.log(top) - math.log(bottom)

    def x(v: float) -> float:
        v = min(max(v, bottom), top)
        return round(left + (width - 2 * left) * (math.log(v) - math.log(bottom)) / span, 1)

    rows = [
        {
            "y": 14 + i * row,
            "lo": x(s["lift_lo_adjusted"]),
            "pt": x(s["lift"]),
            "hi": x(s["lift_hi"]) if math.isfinite(s["lift_hi"]) else x(top),
            "open": not math.isfinite(s["lift_hi"]),
            "n": i + 1,
        }
        for i, s in enumerate(spots)
    ]
    ticks = [t for t in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if bottom <= t <= top]
    return {
        "width": width,
        "height": 30 + len(spots) * row,
        "rows": rows,
        "one": x(1.0),
        "ticks": [(x(t), f"{t:g}") for t in ticks],
        "axis": 22 + len(spots) * row,
    }


def confirmed_spots(t: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Every method's confirmed findings on target ``t``, ranked by :func:`weakspot.findings.rank_key` (regions
    before the class alone, each by the adjusted lower bound of the lift): ``finding`` rows with the method's title,
    the lift, its adjusted bound, the adjusted p and the family, the size and the failures beyond the control's
    rate."""
    from weakspot.findings import rank_key
    from weakspot.methods import finds_of

    out = []
    for m in t.get("methods", []):
        df = m.get("findings")
        if m.get("reason") or df is None or "confirmed" not in df.columns:
            continue
        for r in df[df["confirmed"].astype(bool)].to_dict("records"):
            n, f = int(r.get("n_confirm", 0) or 0), int(r.get("failures", 0) or 0)
            c, nc = int(r.get("control_failures", 0) or 0), int(r.get("n_control", 0) or 0)
            excess = f - n * c / nc if nc else float("nan")
            out.append(
                {
                    **finding(r),
                    "kind": str(r.get("kind", "")),
                    "method": str(m["title"]),
                    "finds": finds_of(str(m.get("name", ""))),
                    "lift": float(r["lift"]),
                    "lift_lo_adjusted": float(r.get("lift_lo_adjusted", float("nan"))),
                    "lift_hi": float(r.get("lift_hi", float("nan"))),
                    "interval": interval(r["lift_lo"], r["lift_hi"]),
                    "adjusted": bound(r.get("lift_lo_adjusted", float("nan"))),
                    "p_adjusted": f"{float(r.get('p_adjusted', float('nan'))):.2g}",
                    "family": int(r.get("family", 0) or 0),
                    "size": n,
                    "rate": f / n if n else 0.0,
                    "control_rate": c / nc if nc else 0.0,
                    "excess": fmt(excess, 3),
                }
            )
    return sorted(out, key=lambda f: rank_key(f["kind"], f["lift_lo_adjusted"]))


def target(t: Mapping[str, Any], max_findings: int = 4) -> Dict[str, Any]:
    """``{"name", "intro", "confirmed": [...], "model", "accuracy", "methods": [...]}`` (see
    :func:`weakspot.report.html.weak_spots_html`) for ``weak_spots.html``."""
    spots = confirmed_spots(t)
    return {
        "name": t["name"],
        "intro": t.get("intro", ""),
        "confirmed": spots,
        "kinds": by_kind(spots),
        "fdr": FDR,
        "model": t.get("model"),
        "accuracy": t.get("accuracy"),
        "methods": [method_card(m, max_findings) for m in t.get("methods", [])],
    }


def overview(shown: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The table the report opens with, from the targets as :func:`target` shows them, a row per target: its model,
    accuracy, how many confirmed weak spots, the worst in words with its lift, and per method whether it beat its
    found (``found``, ``clear``, ``unchecked``, ``none``, ``not run``, ``missing``) and how many."""
    from weakspot.findings import LABEL_ONLY

    methods: List[str] = []
    for t in shown:
        methods += [m["title"] for m in t["methods"] if m["title"] not in methods]
    rows = []
    for t in shown:
        verdicts = {
            m["title"]: "not run" if m["reason"] else "missing" if m["missing"] else m["control"]["kind"]
            for m in t["methods"]
        }
        acc = t.get("accuracy")
        rows.append(
            {
                "name": t["name"],
                "model": str(t.get("model") or ""),
                "accuracy": "" if acc is None else f"{100 * float(acc):.1f}%",
                "n_confirmed": len(t["confirmed"]),
                "worst": "; ".join(
                    f"{k['title']}: {s['weak_spot']} ({s['method']}): lift {fmt(s['lift'], 2)}, at least {s['adjusted']}"
                    for k in t.get("kinds", [])
                    for s in [next((s for s in k["spots"] if s.get("kind") not in LABEL_ONLY), None)]
                    if s is not None
                )
                or ("none confirmed" if not t["confirmed"] else "no region: only a class alone (its card)"),
                "verdicts": [verdicts.get(m, "") for m in methods],
                "found": [sum(s["method"] == m for s in t["confirmed"]) for m in methods],
            }
        )
    return {"methods": methods, "rows": rows}


def verdict_line(since: Mapping[str, Any]) -> str:
    """One line: how many watched metrics regressed since the previous audit (or that there is none yet)."""
    if not since.get("n_audits"):
        return "no audit recorded yet (`weakspot audit` records each one)"
    if not since.get("previous"):
        return "first audit in the history: nothing to compare with yet"
    rows = since.get("rows", [])
    bad = sum(bool(r["regression"]) for r in rows)
    return (
        f"{bad} regression{'s' if bad != 1 else ''} among {len(rows)} watched metrics since audit {since['previous']}"
    )


def _since_cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, list) and not v:
        return "none"
    if isinstance(v, float):
        return number(v)
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def since_section(
    comparison: Mapping[str, Any], trend_png: Optional[bytes] = None, max_rows: int = 40
) -> Dict[str, Any]:
    """:func:`weakspot.history.since_last`'s comparison as ``since.html`` shows it: the regressions first, then every
    other watched metric, ``max_rows`` in all, and the trend figure over past audits."""
    rows = list(comparison.get("rows", []))
    bad = [r for r in rows if r["regression"]]
    shown = (bad + [r for r in rows if not r["regression"]])[:max_rows]
    n_trend = len(comparison.get("trend") or {})
    return {
        "bad": bool(bad),
        "verdict": verdict_line(comparison),
        "recorded": bool(comparison.get("recorded")),
        "current": str(comparison.get("current")),
        "n_audits": comparison.get("n_audits", 0),
        "rows": [
            {
                "regression": bool(r["regression"]),
                "metric": r["metric"],
                "before": _since_cell(r["before"]),
                "after": _since_cell(r["after"]),
                "rule": r["rule"],
                "note": r["note"],
                "change": _since_cell(r["change"]) if r["change"] is not None else "",
            }
            for r in shown
        ],
        "more": max(0, len(rows) - max_rows),
        "trend": png_src(trend_png) if trend_png else "",
        "trend_which": (
            "The watched metrics" if n_trend <= 12 else f"12 of the {n_trend} watched metrics (regressions first)"
        ),
        "n_times": len(comparison.get("times", [])),
    }


def conditions_section(since: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The conditions summary at the top of the report: every gate (params.yaml ``gates``) and the regression rules
    of the history, pass or fail, failures first (``since["gates"]``: the audit's gate rows); None without either."""
    gates = list(since.get("gates") or [])
    rules = list(since.get("rows") or [])
    if not gates and not rules:
        return None
    rows: List[Dict[str, Any]] = [
        {
            "passed": bool(g["passed"]),
            "kind": "gate",
            "condition": str(g["condition"]),
            "numbers": str(g.get("numbers", "")),
        }
        for g in gates
    ]
    bad_rules = [r for r in rules if r.get("regression")]
    rows += [
        {
            "passed": False,
            "kind": "regression rule",
            "condition": f"{r['metric']} (worse if {r['rule']})",
            "numbers": f"{_since_cell(r['before'])} -> {_since_cell(r['after'])}",
        }
        for r in bad_rules
    ]
    if rules:
        n_ok = len(rules) - len(bad_rules)
        rows.append(
            {
                "passed": not bad_rules,
                "kind": "regression rules",
                "condition": f"no watched metric worse than audit {since.get('previous')}",
                "numbers": f"{n_ok} of {len(rules)} watched metrics within their rules",
            }
        )
    n_bad = sum(not r["passed"] for r in rows)
    rows.sort(key=lambda r: r["passed"])
    return {
        "bad": bool(n_bad),
        "rows": rows,
        "verdict": (
            f"{n_bad} of {len(rows)} conditions failed"
            if n_bad
            else "the one condition holds"
            if len(rows) == 1
            else f"all {len(rows)} conditions hold"
        ),
    }


def comparison(cmp: Mapping[str, Any], curve_png: Optional[bytes] = None) -> Dict[str, Any]:
    """``weakspot compare``'s data (:func:`ops.verdict.compare.compare_targets`) as ``compare.html`` shows it."""
    from weakspot.fmt import interval

    def spot(s: Mapping[str, Any]) -> Dict[str, str]:
        return {
            "method": str(s["method"]),
            "weak_spot": str(s["weak_spot"]),
            "lift": f"{number(float(s['lift']))} ({interval(s['lift_lo'], s['lift_hi'])})",
        }

    a, b = str(cmp["a"]), str(cmp["b"])

    def cell(v: Any) -> str:
        return "-" if v is None else number(v)

    methods = [
        {
            "title": str(m["title"]),
            "rows": [{"metric": str(f["metric"]), "a": cell(f["a"]), "b": cell(f["b"])} for f in m["figures"]],
        }
        for m in cmp["methods"]
    ]
    return {
        "a": a,
        "b": b,
        "data": json.dumps(cmp.get("data"), sort_keys=True),
        "n_test": cmp.get("n_test", "?"),
        "accuracy": (number(cmp["accuracy"][a]), number(cmp["accuracy"][b])),
        "methods": methods,
        "shared": [
            {
                "method": s["a"]["method"],
                "weak_spot": s["a"]["weak_spot"],
                "lift_a": spot(s["a"])["lift"],
                "lift_b": spot(s["b"])["lift"],
            }
            for s in cmp["shared"]
        ],
        "fixed": [spot(s) for s in cmp["fixed"]],
        "new": [spot(s) for s in cmp["new"]],
        "curve": png_src(curve_png) if curve_png else "",
    }


def _parts(
    s: Mapping[str, Any], key: str, figures: Mapping[str, bytes], tables: Mapping[str, Any], max_table_rows: int
) -> List[Dict[str, Any]]:
    """A section's figures and tables in order, each ``{"kind": "figure", "caption", "figure"}``, ``{"kind": "table",
    "caption", "table"}`` or ``{"kind": "missing", "missing"}`` (a figure or table the section names, not given)."""
    out = []
    for item in s.get("items", []):
        caption = item.get("caption", "")
        if "figure" in item:
            fkey = f"{key}/{item['figure']}"
            png = figures.get(fkey)
            out.append(
                {"kind": "missing", "missing": f"figure {fkey}"}
                if png is None
                else {"kind": "figure", "caption": caption, "figure": png_src(png)}
            )
        elif "table" in item:
            tkey = f"{key}/{item['table']}"
            df = tables.get(tkey)
            out.append(
                {"kind": "missing", "missing": f"table {tkey}"}
                if df is None
                else {"kind": "table", "caption": caption, "table": table(df, max_table_rows)}
            )
    return out


def section(
    s: Mapping[str, Any],
    key: str,
    *,
    figures: Mapping[str, bytes],
    tables: Mapping[str, Any],
    metrics: Mapping[str, Mapping[str, Any]],
    max_table_rows: int,
) -> Dict[str, Any]:
    """One stage's section (its key is ``stage/target``) as ``section.html`` shows it: metric cards, summary,
    figures and tables, and the lineage (params, code version, input hashes, all metrics) folded away."""
    lineage = s.get("lineage") or {}
    return {
        "id": anchor(key),
        "title": s.get("title", s["stage"]),
        "cards": cards(metrics.get(key, {}), s.get("key_metrics")),
        "summary": list(s.get("summary", [])),
        "parts": _parts(s, key, figures, tables, max_table_rows),
        "details": bool(lineage) or key in metrics,
        "metrics_json": json.dumps(metrics[key], indent=2, sort_keys=True) if key in metrics else None,
        "lineage_json": json.dumps(lineage, indent=2, sort_keys=True),
    }


def _sections(sections: List[Mapping[str, Any]], groups: Mapping[str, str], **data: Any) -> List[Dict[str, Any]]:
    """The sections (in pipeline order) as ``section.html`` shows them, each with the group heading it opens
    (``group``: None under a heading already shown)."""
    seen = set()
    out = []
    for s in sections:
        key = f"{s['stage']}/{s['target']}" if s.get("target") else s["stage"]
        group = groups.get(s["stage"], s.get("title", s["stage"]))
        out.append(
            {**section(s, key, **data), "group": None if group in seen else group, "group_id": "group-" + anchor(key)}
        )
        seen.add(group)
    return out


def page(
    sections: Sequence[Mapping[str, Any]],
    *,
    figures: Mapping[str, bytes],
    tables: Mapping[str, Any],
    metrics: Mapping[str, Mapping[str, Any]],
    title: str,
    run_info: Optional[Mapping[str, Any]],
    max_table_rows: int,
    targets: Optional[List[Mapping[str, Any]]],
    groups: Optional[Mapping[str, str]],
    since: Optional[Mapping[str, Any]],
    trend_png: Optional[bytes],
) -> Dict[str, Any]:
    """Everything ``page.html`` shows (see :func:`weakspot.report.html.render_report` for the arguments): the
    header's line, the navigation, the headlines, each target's weak spots, since the last audit, every section."""
    sections = sorted(sections, key=lambda s: (s.get("order", 99), s.get("target") or "", s.get("stage", "")))
    secs = _sections(
        sections, dict(groups or {}), figures=figures, tables=tables, metrics=metrics, max_table_rows=max_table_rows
    )
    shown = [target(t) for t in targets or []]
    info = dict(run_info or {})
    if since is not None:
        info["since the last audit"] = verdict_line(since)
    cond = None if since is None else conditions_section(since)
    failures = list((since or {}).get("failures") or [])
    nav = (
        ([("failures", "Incomplete")] if failures else [])
        + ([("conditions", "Conditions")] if cond else [])
        + ([("overview", "Targets")] if shown else [])
        + (
            [("glance", "At a glance")]
            + [(f"target-{t['name']}", f"Weak spots: {t['name']}") for t in shown]
            + ([("since", "Since the last audit")] if since is not None else [])
            + [(s["group_id"], s["group"]) for s in secs if s["group"] is not None]
        )
    )
    return {
        "title": title,
        "meta": [(str(k), str(v)) for k, v in info.items()],
        "nav": nav,
        "glance": [(s.get("title", s["stage"]), h) for s in sections for h in s.get("headline", [])],
        "targets": shown,
        "sections": secs,
        "overview": overview(shown) if shown else None,
        "since": None if since is None else since_section(since, trend_png, max(40, max_table_rows)),
        "conditions": None if since is None else conditions_section(since),
        "failures": failures,
    }
