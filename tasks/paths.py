"""Every artifact path of the pipeline, in one place (the library knows no file layout; dvc.yaml is generated from
these by :mod:`tasks.pipeline`). Paths are relative to the repository root, DVC's working directory.

```
data/render/                          the rendered scene data set (shared by every scene target)
data/targets/<target>/prepared/       train/val/test Parquet + lineage.json
data/targets/<target>/model/          model.pt (state_dict) or model.joblib, model.json (how to rebuild it + lineage)
plots/<stage>/<target>/               a stage's report section: section.json, figures (PNG), tables (CSV)
metrics/<stage>/<target>.json         a stage's headline metrics (dvc metrics; tasks/headline.py)
plots/<stage>/<target>/results.json   all of a stage's metrics (the report, history and gates read these)
findings/<target>/<method>.parquet    the weak spots a method found, one shape for every method (+ example PNGs)
reports/index.html                    the report
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

PARAMS = Path("params.yaml")
RENDER = Path("data/render")
TARGETS = Path("data/targets")
PLOTS = Path("plots")
METRICS = Path("metrics")
FINDINGS = Path("findings")
REPORT = Path("reports/index.html")
EXTERNAL = Path("data/external")
#: content-addressed weights of cached training tasks (weights never travel through Prefect's result store)
BLOBS = Path(".prefect/blobs")


def prepared(target: str) -> Path:
    return TARGETS / target / "prepared"


def model_dir(target: str) -> Path:
    return TARGETS / target / "model"


def stage_key(stage: str, target: Optional[str] = None) -> str:
    """``gad/phoneme`` for a per-target stage, ``render`` for a shared one: the folder under plots/ and metrics/."""
    return f"{stage}/{target}" if target else stage


def plots(stage: str, target: Optional[str] = None) -> Path:
    return PLOTS / stage_key(stage, target)


def metrics(stage: str, target: Optional[str] = None) -> Path:
    return METRICS / f"{stage_key(stage, target)}.json"


def results(stage: str, target: Optional[str] = None) -> Path:
    """Every metric of a stage (its metrics file holds the headline only)."""
    return plots(stage, target) / "results.json"


def results_for(metrics_file: "Path | str") -> Path:
    """The results file beside ``metrics/<stage>[/<target>].json`` (a path relative to the root): every metric of
    that stage, where the metrics file holds its headline."""
    return PLOTS / Path(metrics_file).relative_to(METRICS).with_suffix("") / "results.json"


def findings(target: str, method: str) -> Path:
    return FINDINGS / target / f"{method}.parquet"


def findings_extra(target: str, method: str, name: str) -> Path:
    """A method's extra product next to its findings, e.g. ``findings/phoneme/gad_to_label.csv``."""
    return FINDINGS / target / f"{method}_{name}"


def repaired(target: str, method: str) -> Path:
    """``data/targets/<t>/repaired_<method>/``: a method's repaired copy of the target's model (model.pt + model.json)."""
    return TARGETS / target / f"repaired_{method}"


#: The tracked files whose changes do not make a commit other than what ran (git pathspecs): params.yaml is in the
#: lineage and the history itself, dvc.yaml is generated from it, packages.yaml from the environment (its versions in
#: the lineage and dvc.lock too), and dvc.lock is DVC's record; only changes to other tracked files (the code, shipped
#: data) do.
NOT_CODE = (":!params.yaml", ":!dvc.yaml", ":!dvc.lock", ":!packages.yaml")
