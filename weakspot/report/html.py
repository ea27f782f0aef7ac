"""Render report sections into one self-contained HTML page.

Caveat first: this module only formats what it is given; it reads no files. The report flow collects each stage's
``section.json``, figures (PNG bytes) and tables, and passes them here.
"""

from __future__ import annotations

import base64
import html
import json
from typing import Any, Dict, List, Mapping, Optional

_CSS = """
:root { --fg:#1d2430; --muted:#5b6678; --line:#dde3ec; --accent:#b4232c; --bg:#fafbfc; --card:#fff; }
* { box-sizing: border-box; }
body { font: 15px/1.55 -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0; }
header { background: #1d2430; color: #fff; padding: 28px 40px 22px; }
header h1 { margin: 0 0 4px; font-size: 26px; letter-spacing: .2px; }
header .meta { color: #b9c2d0; font-size: 13px; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid var(--line); padding: 8px 40px;
      z-index: 2; font-size: 14px; }
nav a { margin-right: 18px; color: var(--fg); text-decoration: none; }
nav a:hover { color: var(--accent); }
main { max-width: 1180px; margin: 0 auto; padding: 10px 40px 60px; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 18px 26px 22px;
          margin: 26px 0; }
section h2 { margin: 0 0 10px; font-size: 21px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0 4px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 130px; background: #fcfcfd; }
.card .v { font-size: 20px; font-weight: 600; }
.card .k { font-size: 12px; color: var(--muted); }
figure { margin: 18px 0; }
figure img { max-width: 100%; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 4px; display: block; overflow-x: auto;
        max-width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: right; }
th { background: #f1f4f8; text-align: center; }
td:first-child, th:first-child { text-align: left; }
.caption { color: var(--muted); font-size: 13px; margin-top: 16px; }
details { margin-top: 14px; font-size: 13px; }
summary { cursor: pointer; color: var(--muted); }
pre { background: #f4f6f9; padding: 10px; border-radius: 4px; overflow-x: auto; font-size: 12px; }
.missing { color: var(--accent); }
.glance { border-left: 4px solid var(--accent); }
.glance li { margin: 4px 0; }
.glance .stage { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .5px; }
footer { color: var(--muted); font-size: 12px; text-align: center; padding: 20px; }
.target h2 { font-size: 22px; }
.target .intro { color: var(--muted); margin-top: 0; }
.methods { display: grid; grid-template-columns: repeat(auto-fit, minmax(330px, 1fr)); gap: 16px; margin-top: 10px; }
.method { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; background: #fcfcfd; }
.method h3 { margin: 0 0 2px; font-size: 16px; }
.method .paper { color: var(--muted); font-size: 12px; margin-bottom: 8px; }
.method.skipped { background: #f6f7f9; color: var(--muted); }
.finding { display: flex; gap: 12px; border-top: 1px solid var(--line); padding: 8px 0; }
.finding:first-of-type { border-top: none; }
.finding img { width: 84px; height: 84px; image-rendering: pixelated; border: 1px solid var(--line); flex: none; }
.finding .what { font-weight: 600; font-size: 14px; }
.finding .sev { color: var(--accent); font-size: 13px; }
.finding .pred { font-size: 12px; color: var(--muted); }
.finding table.row { font-size: 11px; margin: 4px 0 0; }
.finding table.row td { padding: 1px 6px; border: none; text-align: left; }
.meaning { font-size: 12px; color: var(--muted); margin: 6px 0 0; }
.since.bad { border-left: 4px solid var(--accent); }
.since .verdict { font-size: 17px; font-weight: 600; margin: 4px 0; }
.since.bad .verdict { color: var(--accent); }
.since tr.reg td { color: var(--accent); font-weight: 600; }
h2.group { font-size: 24px; margin: 40px 0 0; border-bottom: 2px solid var(--line); padding-bottom: 6px; }
"""


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return html.escape(str(v))
    if isinstance(v, float):
        if v != v:  # NaN
            return "NaN"
        return f"{v:.4g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"
    return html.escape(str(v))


#: a table with more columns than this and at most TRANSPOSE_ROWS rows is shown transposed (one line per column)
TRANSPOSE_COLUMNS, TRANSPOSE_ROWS = 14, 8


def _row_labels(df: Any) -> list:
    """Names for the rows of a transposed table: the leading columns' values, as few as tell the rows apart."""
    cols = list(df.columns)
    for k in range(1, min(3, len(cols)) + 1):
        labels = [" / ".join(_fmt(v) for v in row) for row in df[cols[:k]].itertuples(index=False)]
        if len(set(labels)) == len(labels):
            return labels
    return [f"row {i + 1}" for i in range(len(df))]


def _table_html(df: Any, max_rows: int) -> str:
    if len(df.columns) > TRANSPOSE_COLUMNS and 0 < len(df) <= min(TRANSPOSE_ROWS, max_rows):
        # wide and short (e.g. GAD's Table I, one row per seed): one line per column reads better than a scroll bar
        labels = _row_labels(df)
        head = "<th>column</th>" + "".join(f"<th>{l}</th>" for l in labels)
        rows = "".join(f"<tr><td>{html.escape(str(c))}</td>" + "".join(f"<td>{_fmt(v)}</td>" for v in df[c])
                       + "</tr>" for c in df.columns)
        return f"<table class='transposed'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    shown = df.head(max_rows)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>" for row in shown.itertuples(index=False))
    more = f"<div class='caption'>… {len(df) - max_rows} more rows in the CSV</div>" if len(df) > max_rows else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{more}"


def _cards(metrics: Mapping[str, Any], keys: Any = None) -> str:
    """Metric cards: the section's ``key_metrics`` in order, else its first eight scalar metrics."""
    items = [(k, metrics[k]) for k in keys if k in metrics] if keys else list(metrics.items())
    scalars = [(k, v) for k, v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not scalars:
        return ""
    cards = "".join(f"<div class='card'><div class='v'>{_fmt(v)}</div><div class='k'>{html.escape(k)}</div></div>"
                    for k, v in scalars[:8])
    return f"<div class='cards'>{cards}</div>"


def _img(png: bytes, alt: str = "") -> str:
    return f"<img alt='{html.escape(alt)}' src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'>"


def _finding_html(row: Mapping[str, Any]) -> str:
    img = row.get("image")
    pic = _img(bytes(img), str(row.get("weak_spot", ""))) if isinstance(img, (bytes, bytearray)) and img else ""
    extra = ""
    for key in ("example", "factors"):
        raw = row.get(key) or ""
        if raw:
            try:
                values = json.loads(raw)
            except ValueError:
                values = None
            if isinstance(values, dict):
                cells = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{_fmt(v)}</td></tr>" for k, v in list(values.items())[:8])
                extra += f"<table class='row'>{cells}</table>"
    label = row.get("label") or ""
    pred = (f"predicted <b>{html.escape(str(row.get('prediction', '')))}</b> with confidence "
            f"{_fmt(float(row.get('confidence', float('nan'))))}" if row.get("prediction") else "")
    if label:
        pred += f"{'; ' if pred else ''}true class {html.escape(str(label))}"
    return (f"<div class='finding'>{pic}<div><div class='what'>{int(row.get('rank', 0))}. {html.escape(str(row.get('weak_spot', '')))}</div>"
            f"<div class='sev'>severity {_fmt(float(row.get('severity', float('nan'))))}</div>"
            f"<div class='pred'>{pred}</div>{extra}</div></div>")


def weak_spots_html(target: Mapping[str, Any], max_findings: int = 4) -> str:
    """The "Weak spots of <target>" section: every method's top findings side by side, with their examples.

    ``target``: ``{"name", "intro", "methods": [{"name", "title", "paper", "reason" (skipped) or "findings"
    (a DataFrame in the findings shape), "anchor"}]}``.
    """
    cols = []
    for m in target.get("methods", []):
        head = f"<h3>{html.escape(m['title'])}</h3><div class='paper'>{html.escape(m.get('paper', ''))}</div>"
        if m.get("reason"):
            cols.append(f"<div class='method skipped'>{head}<p>Not run on this target: {html.escape(m['reason'])}.</p></div>")
            continue
        df = m.get("findings")
        if df is None:
            cols.append(f"<div class='method'>{head}<p class='missing'>no findings file: run the {html.escape(m['name'])} "
                        "stage (weakspot audit)</p></div>")
            continue
        rows = df.head(max_findings).to_dict("records")
        body = "".join(_finding_html(r) for r in rows) or "<p>No weak spot found.</p>"
        meaning = df["severity_meaning"].iloc[0] if len(df) else ""
        link = f" <a href='#{html.escape(m.get('anchor', ''))}'>details</a>" if m.get("anchor") else ""
        cols.append(f"<div class='method'>{head}{body}<p class='meaning'>Severity: {html.escape(meaning)}. "
                    f"{len(df)} finding(s) in all.{link}</p></div>")
    return (f"<section class='target' id='target-{html.escape(target['name'])}'><h2>Weak spots of "
            f"{html.escape(target['name'])}</h2><p class='intro'>{html.escape(target.get('intro', ''))}</p>"
            f"<div class='methods'>{''.join(cols)}</div></section>")


def verdict_line(since: Mapping[str, Any]) -> str:
    """One line: how many watched metrics regressed since the previous audit (or that there is none yet)."""
    if not since.get("n_audits"):
        return "no audit recorded yet (`weakspot audit` records each one)"
    if not since.get("previous"):
        return "first audit in the history: nothing to compare with yet"
    rows = since.get("rows", [])
    bad = sum(bool(r["regression"]) for r in rows)
    return (f"{bad} regression{'s' if bad != 1 else ''} among {len(rows)} watched metrics since audit "
            f"{since['previous']}")


def since_html(since: Mapping[str, Any], trend_png: Optional[bytes] = None, max_rows: int = 40) -> str:
    """The "Since the last audit" section: the verdict, the regressions first, every watched metric's move, and
    the trend over past audits."""
    rows = list(since.get("rows", []))
    bad = [r for r in rows if r["regression"]]
    cls = "since bad" if bad else "since"
    who = (f"This audit is <code>{html.escape(str(since['current']))}</code>" if since.get("recorded")
           else "These results come from a run not recorded in the history (e.g. <code>dvc repro</code> by hand)")
    parts = [f"<section class='{cls}' id='since'><h2>Since the last audit</h2>",
             f"<p class='verdict'>{html.escape(verdict_line(since))}</p>",
             f"<p class='meaning'>{who}; {since.get('n_audits', 0)} audits recorded. The rules (history.rules in "
             "params.yaml) say which metrics are watched, which way is worse and by how much a move counts.</p>"]
    if rows:
        def cell(v: Any) -> str:
            if v is None:
                return "–"
            if isinstance(v, list) and not v:
                return "none"
            if isinstance(v, float):
                return _fmt(v)
            return html.escape(json.dumps(v) if isinstance(v, (list, dict)) else str(v))

        body = "".join(
            f"<tr class='{'reg' if r['regression'] else ''}'><td>{'REGRESSION' if r['regression'] else ''}</td>"
            f"<td>{html.escape(r['metric'])}</td><td>{cell(r['before'])}</td><td>{cell(r['after'])}</td>"
            f"<td>{cell(r['change']) if r['change'] is not None else ''}</td><td>{html.escape(r['rule'])}</td>"
            f"<td>{html.escape(r['note'])}</td></tr>"
            for r in (bad + [r for r in rows if not r["regression"]])[:max_rows])
        parts.append("<table><tr><th></th><th>metric</th><th>before</th><th>after</th><th>change</th>"
                     f"<th>worse if</th><th>note</th></tr>{body}</table>")
        if len(rows) > max_rows:
            parts.append(f"<p class='meaning'>{len(rows) - max_rows} more rows in "
                         "history/&lt;audit&gt;.comparison.json</p>")
    if trend_png:
        n_trend = len(since.get("trend") or {})
        which = "The watched metrics" if n_trend <= 12 else f"12 of the {n_trend} watched metrics (regressions first)"
        parts.append(f"<figure>{_img(trend_png, 'trend of the watched metrics')}<figcaption>{which} "
                     f"over the last {len(since.get('times', []))} audits, oldest first; a red segment is this "
                     "audit's regression.</figcaption></figure>")
    parts.append("<p class='meaning'>Trace any number: <code>weakspot lineage metrics/&lt;stage&gt;/&lt;target&gt;"
                 ".json KEY</code>. Reproduce a past audit: <code>weakspot rerun AUDIT_ID</code>.</p></section>")
    return "".join(parts)


def _anchor(key: str) -> str:
    return key.replace("/", "-")


def render_report(
    sections: List[Dict[str, Any]],
    *,
    figures: Mapping[str, bytes],
    tables: Mapping[str, Any],
    metrics: Mapping[str, Mapping[str, Any]],
    title: str = "weakspot audit",
    run_info: Optional[Mapping[str, Any]] = None,
    max_table_rows: int = 20,
    targets: Optional[List[Mapping[str, Any]]] = None,
    groups: Optional[Mapping[str, str]] = None,
    since: Optional[Mapping[str, Any]] = None,
    trend_png: Optional[bytes] = None,
) -> str:
    """Return the report as one HTML string: "At a glance", the weak spots of each target, then every section.

    Parameters
    ----------
    sections : list of dict
        Each with ``stage``, ``target`` (or None), ``order``, ``title``, ``summary`` (list of str), ``items`` and
        ``lineage``; its key is ``stage/target`` (``stage`` for a shared stage).
    figures : mapping of "key/name" -> PNG bytes
    tables : mapping of "key/name" -> pandas.DataFrame
    metrics : mapping of key -> its metrics dict
    run_info : mapping shown in the page header (e.g. the time and git commit)
    max_table_rows : int
        Tables longer than this are cut in the page (the CSV keeps every row).
    targets : list of mapping, optional
        One per target, as :func:`weak_spots_html` takes it; shown first.
    groups : mapping of stage -> group heading, optional
        Sections of these stages are shown under one heading each (e.g. gad -> "Generalized Adversarial Distance").
    since : mapping, optional
        :func:`weakspot.history.since_last`'s comparison with the previous audit, shown after the weak spots (with
        ``trend_png``, the trend figure) and as one line in the header.

    Examples
    --------
    >>> page = render_report([], figures={}, tables={}, metrics={}, title="empty")
    >>> "<h1>empty</h1>" in page
    True
    """
    groups = dict(groups or {})
    sections = sorted(sections, key=lambda s: (s.get("order", 99), s.get("target") or "", s.get("stage", "")))
    key_of = (lambda s: f"{s['stage']}/{s['target']}" if s.get("target") else s["stage"])
    nav_items = [("glance", "At a glance")] + [(f"target-{t['name']}", f"Weak spots: {t['name']}") for t in targets or []]
    seen_groups = set()
    body = []
    glance = [(s, h) for s in sections for h in s.get("headline", [])]
    if glance:
        items = "".join(f"<li><span class='stage'>{html.escape(s.get('title', s['stage']))}</span><br>{html.escape(h)}</li>"
                        for s, h in glance)
        body.append(f"<section class='glance' id='glance'><h2>At a glance</h2><ul>{items}</ul></section>")
    body.extend(weak_spots_html(t) for t in targets or [])
    if since is not None:
        nav_items.append(("since", "Since the last audit"))
        body.append(since_html(since, trend_png, max_rows=max(40, max_table_rows)))
    for s in sections:
        stage = s["stage"]
        key = key_of(s)
        group = groups.get(stage, s.get("title", stage))
        if group not in seen_groups:
            seen_groups.add(group)
            gid = "group-" + _anchor(key)
            nav_items.append((gid, group))
            body.append(f"<h2 class='group' id='{html.escape(gid)}'>{html.escape(group)}</h2>")
        parts = [f"<section id='{html.escape(_anchor(key))}'><h2>{html.escape(s.get('title', stage))}</h2>"]
        parts.append(_cards(metrics.get(key, {}), s.get("key_metrics")))
        parts.extend(f"<p>{html.escape(p)}</p>" for p in s.get("summary", []))
        for item in s.get("items", []):
            caption = html.escape(item.get("caption", ""))
            if "figure" in item:
                fkey = f"{key}/{item['figure']}"
                png = figures.get(fkey)
                if png is None:
                    parts.append(f"<p class='missing'>figure {html.escape(fkey)} is missing</p>")
                    continue
                parts.append(f"<figure>{_img(png, item.get('caption', ''))}<figcaption>{caption}</figcaption></figure>")
            elif "table" in item:
                tkey = f"{key}/{item['table']}"
                df = tables.get(tkey)
                if df is None:
                    parts.append(f"<p class='missing'>table {html.escape(tkey)} is missing</p>")
                    continue
                parts.append(f"<div class='caption'>{caption}</div>{_table_html(df, max_table_rows)}")
        lin = s.get("lineage") or {}
        if lin or key in metrics:
            parts.append("<details><summary>Lineage: params, code version, input hashes, all metrics</summary>")
            if key in metrics:
                parts.append(f"<pre>{html.escape(json.dumps(metrics[key], indent=2, sort_keys=True))}</pre>")
            parts.append(f"<pre>{html.escape(json.dumps(lin, indent=2, sort_keys=True))}</pre></details>")
        parts.append("</section>")
        body.append("".join(parts))
    info = dict(run_info or {})
    if since is not None:
        info["since the last audit"] = verdict_line(since)
    meta = " · ".join(f"{html.escape(str(k))}: {html.escape(str(v))}" for k, v in info.items())
    if not sections and not targets:
        body.append("<section><h2>No stage results yet</h2><p>Run <code>make audit</code> (or <code>dvc repro</code>) "
                    "to produce them.</p></section>")
    nav = "".join(f"<a href='#{html.escape(a)}'>{html.escape(t)}</a>" for a, t in nav_items)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><header><h1>{html.escape(title)}</h1><div class='meta'>{meta}</div></header>"
        f"<nav>{nav}</nav><main>{''.join(body)}</main>"
        "<footer>Made by weakspot. Every number traces to the stage's lineage: params, code commit and input hashes."
        "</footer></body></html>"
    )
