"""``weakspot plots diff A B``: DVC's own ``dvc plots diff`` between two recorded audits: every curve dvc.yaml
declares (reliability, robustness, GAD's SDR per query, the examiner's Fig. 1) drawn for both, one colour each.

Caveats first:

* Audits are not git commits here (dvc.lock is kept per audit in the history store, :mod:`ops.verdict.history`), so the two
  audits' plot files are taken from the DVC cache by each audit's recorded dvc.lock (a folder output's listing,
  then the file's hash) and committed into a throwaway git + DVC repository, one commit per audit tagged with its
  id; ``dvc plots diff`` runs there and writes its HTML. Nothing in this repository changes.
* The page draws offline: DVC's template with Vega inlined (:func:`offline_template`), not loaded from a CDN.
* A plot whose file one audit lacks (a curve added after it, a target it did not have) is drawn for the audit that
  has it only; a file whose cache entry is gone (``dvc gc``) is reported as missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import yaml

from weakspot.errors import DataError

from ops.verdict.history import find_audit
from ops.provenance.rerun import lock_outputs


def _cache_file(root: Path, md5: str) -> Path:
    return root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def plot_file(root: Path, lock: "str | Path", path: str) -> Optional[bytes]:
    """The bytes of ``path`` as the audit of ``lock`` wrote it, from the DVC cache (None when unavailable)."""
    for out, o in lock_outputs(lock).items():
        if path == out and not o["dir"]:
            f = _cache_file(root, o["md5"])
            return f.read_bytes() if f.is_file() else None
        if path.startswith(out.rstrip("/") + "/") and o["dir"]:
            listing = _cache_file(root, o["md5"])
            if not listing.is_file():
                return None
            rel = path[len(out.rstrip("/")) + 1 :]
            for entry in json.loads(listing.read_text()):
                if entry.get("relpath") == rel:
                    f = _cache_file(root, entry["md5"])
                    return f.read_bytes() if f.is_file() else None
    return None


def declared_plots(root: Path) -> Dict[str, dict]:
    """dvc.yaml's plots: ``{file: {x, y}}``."""
    plots = (yaml.safe_load((root / "dvc.yaml").read_text()) or {}).get("plots") or []
    return {k: v for d in plots for k, v in d.items()}


def _run(args: List[str], cwd: Path) -> str:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise DataError(f"{' '.join(args[:3])} failed in {cwd}: {proc.stderr.strip()[-800:]}")
    return proc.stdout


#: DVC's page (dvc_render's PAGE_HTML) with Vega, Vega-Lite and Vega-Embed inlined in place of its CDN scripts.
PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>weakspot: dvc plots diff</title>
<script>{bundle}</script>
<style>table {{ border-spacing: 15px; }} body {{ font-family: sans-serif; }}</style>
</head>
<body>
{{plot_divs}}
</body>
</html>"""


def offline_template(folder: Path) -> Path:
    """An HTML template for ``dvc plots diff --html-template`` that draws with no network: DVC's own page loads
    Vega from a CDN, so a machine offline (or a CI artifact opened later) shows blank plots. The libraries come from
    vl-convert's bundle (the versions it pins)."""
    import vl_convert

    f = folder / "offline.html"
    f.write_text(PAGE.format(bundle=vl_convert.javascript_bundle().replace("</script", "<\\/script")))
    return f


def plots_diff(
    a: str, b: str, root: "str | Path" = ".", store: str = "history", out: "str | Path" = "reports/plots-diff"
) -> Dict[str, object]:
    """Render ``dvc plots diff`` between audits ``a`` and ``b`` into ``out``; ``{"html", "plots", "missing"}``."""
    root = Path(root).resolve()
    audits = [find_audit(root, store, x) for x in (a, b)]
    plots = declared_plots(root)
    work = Path(tempfile.mkdtemp(prefix="weakspot-plots-"))
    dvc = str(Path(sys.executable).parent / "dvc")
    missing: List[str] = []
    try:
        _run(["git", "init", "-q"], work)
        _run([dvc, "init", "-q"], work)
        (work / "dvc.yaml").write_text(yaml.safe_dump({"plots": [{k: v} for k, v in plots.items()]}, sort_keys=False))
        for au in audits:
            for path in plots:
                data = plot_file(root, au["lock"], path)
                if data is None:
                    missing.append(f"{path} ({au['audit_id']})")
                    continue
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                (work / path).write_bytes(data)
            _run(["git", "add", "-A"], work)
            _run(
                [
                    "git",
                    "-c",
                    "user.name=weakspot",
                    "-c",
                    "user.email=weakspot@localhost",
                    "commit",
                    "-q",
                    "--allow-empty",
                    "-m",
                    f"audit {au['audit_id']}",
                ],
                work,
            )
            _run(["git", "tag", str(au["audit_id"])], work)
        dest = Path(out).resolve()
        if dest.exists():
            shutil.rmtree(dest)
        _run(
            [
                dvc,
                "plots",
                "diff",
                str(audits[0]["audit_id"]),
                str(audits[1]["audit_id"]),
                "-o",
                str(dest),
                "--html-template",
                str(offline_template(work)),
            ],
            work,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"html": str(dest / "index.html"), "plots": sorted(plots), "missing": missing}
