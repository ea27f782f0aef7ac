"""``weakspot.audit(model, X_test, y_test)``: the audit from Python, in this process, for a notebook.

Caveats first:

* The same library functions as the pipeline (:func:`weakspot.methods.run_method`, each method's ``run``, ``report``
  and ``figures``, the report's input, :func:`weakspot.report.inputs.report_input`, and its renderer), without DVC,
  Prefect, a repository or files: nothing is written unless :meth:`Audit.to_html` is asked to. The model and data
  given are described by a :class:`~weakspot.targets.InMemoryTarget` (:func:`describe_target`), not a params.yaml
  entry: nothing is parsed, loaded or retrained from a source or a factory. Given the same data, model and params, the findings are the pipeline's (each
  method's candidates corrected as its stage's are; :attr:`Audit.weak_spots` and the page correct over every
  candidate of the target, the family the pipeline's report, gates and summary use: the same candidates, the same
  confirmed set). Give ``y_test`` as a Series and its name is the label's.
* ``params`` holds params.yaml's method sections (``{"gad": {...}, "segments": {...}}``); a section left out is the
  method's defaults, which are the papers' settings (slow on a CPU for some: pass the sections of the repository's
  params.yaml, e.g. ``weakspot.config.read_yaml("params.yaml")``, for its CPU budgets).
* The model you give is the model audited: weakspot never retrains it, so methods that re-split and retrain (GAD's
  extra seeds) run on your split only, and the methods that need its training rows (corner cases, HDA, intrinsic
  robustness) run only when ``X_train``/``y_train`` are given.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Sequence, Tuple

import numpy as np

from weakspot.data.dataset import Dataset
from weakspot.errors import ConfigError, DataError, ModelError

if TYPE_CHECKING:  # pragma: no cover
    from weakspot.targets import InMemoryModel, InMemoryTarget
    from weakspot.models.adapters import Outputs


def _classes_of(model: Any, y: Sequence[Any], classes: Optional[Sequence[Any]]) -> List[Any]:
    if classes is not None:
        return list(classes)
    fitted = getattr(model, "classes_", None)
    if fitted is not None:
        return list(np.asarray(fitted).tolist())
    return sorted(set(np.asarray(y).tolist()))


def text_columns(*tables: Any) -> Dict[str, List[str]]:
    """The categories of every non-numeric column of the DataFrames among ``tables`` (sorted texts over all)."""
    from weakspot.data.categories import is_text, texts_of

    cats: Dict[str, set] = {}
    for X in tables:
        if hasattr(X, "columns"):
            for c in X.columns:
                if is_text(X[c]):
                    cats.setdefault(str(c), set()).update(texts_of(X[c], where="weakspot.audit"))
    return {c: sorted(v) for c, v in cats.items()}


def as_dataset(
    X: Any, y: Any, classes: List[Any], *, what: str, categories: Optional[Dict[str, List[str]]] = None
) -> Dataset:
    """An array or DataFrame and its labels -> :class:`Dataset` (images ``(n, H, W)``/``(n, C, H, W)``, or a table;
    a DataFrame's text columns as codes into ``categories``, by default their own sorted texts)."""
    from pandas import isna as pd_isna

    from weakspot.data.categories import encode
    from weakspot.data.missing import check_image_values, check_table_values

    names = None
    cats = text_columns(X) if categories is None else dict(categories)
    if hasattr(X, "columns"):
        names = [str(c) for c in X.columns]
        X = X.copy()
        X.columns = names
        for c, texts in cats.items():
            X[c] = encode(X[c], texts)
        X = X.to_numpy(dtype=np.float64, na_value=np.nan)
    X = np.asarray(X, dtype=np.float64)  # a table as given; images become float32 in Dataset
    if X.ndim == 3:
        X = X[:, None]
    if X.ndim not in (2, 4):
        raise DataError(f"{what}: X has shape {X.shape}; expected a table (n, d) or images (n, H, W) / (n, C, H, W)")
    if X.ndim == 4:
        check_image_values(X, where=what)
    else:  # a table's missing value stays NaN and reaches the model as it is
        check_table_values(X, names or [f"x{i}" for i in range(X.shape[1])], where=what)
    label = str(y.name) if getattr(y, "name", None) is not None else None  # a Series' name: the label's
    y = np.asarray(y).reshape(-1)
    empty = np.asarray(pd_isna(y), bool)
    if empty.any():
        raise DataError(
            f"{what}: {f'label column {label!r}' if label else 'y (the labels)'} holds {int(empty.sum())} missing "
            "values; "
            "a label cannot be missing (drop those rows, or give them as X_unlabelled)"
        )
    if len(y) != len(X):
        raise DataError(f"{what}: X has {len(X)} rows but y {len(y)}")
    lookup = {c: i for i, c in enumerate(classes)} | {str(c): i for i, c in enumerate(classes)}
    unknown = sorted({str(v) for v in y.tolist() if v not in lookup and str(v) not in lookup})
    if unknown:
        raise DataError(f"{what}: labels {unknown[:5]} are not among the model's classes {[str(c) for c in classes]}")
    codes = np.array([lookup.get(v, lookup.get(str(v))) for v in y.tolist()], dtype=np.int64)
    image = X.ndim == 4
    return Dataset(
        X=X,
        y=codes,
        classes=[str(c) for c in classes],
        image_shape=X.shape[1:] if image else None,
        feature_names=None if image else (names or [f"x{i}" for i in range(X.shape[1])]),
        categories=cats if names else {},
        provenance={  # no source spec: nothing was read from a source
            "description": f"{what}: {len(X)} rows given to weakspot.audit",
            **({"label": label} if label else {}),
        },
    )


def as_classifier(model: Any, n_classes: int, device: str = "auto", outputs: Outputs = "logits") -> Any:
    """A torch module (white-box; a TorchScript module too), a fitted scikit-learn estimator, a function x ->
    probabilities, an onnxruntime session, or the path of a ``.onnx`` graph or a TorchScript ``.pt``/``.pth``
    archive, wrapped as the pipeline wraps it; a weakspot classifier as it is. ``outputs`` says what a torch module's
    or an exported graph's single output holds (``logits`` or ``probs``), as ``outputs:`` in params.yaml."""
    from weakspot.models.adapters import CallableClassifier, SklearnClassifier, TorchClassifier
    from weakspot.models.exported import exported_classifier

    if isinstance(model, (TorchClassifier, SklearnClassifier, CallableClassifier)):
        return model
    if outputs not in ("logits", "probs"):
        raise ConfigError(f"weakspot.audit: outputs must be 'logits' or 'probs', got {outputs!r}")
    exported = exported_classifier(model, n_classes, device, outputs)  # a path, or an onnxruntime session
    if exported is not None:
        return exported
    try:
        import torch

        if isinstance(model, torch.nn.Module):
            return TorchClassifier(model, n_classes=n_classes, device=device, outputs=outputs)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    if callable(getattr(model, "predict_proba", None)):
        return SklearnClassifier(model, n_classes=n_classes)
    if callable(model):
        return CallableClassifier(model, n_classes=n_classes)
    raise ModelError(
        f"weakspot.audit: the model is a {type(model).__name__}; give a torch.nn.Module, a fitted "
        "estimator with predict_proba, a function x -> class probabilities, an onnxruntime.InferenceSession, "
        "or the path of a .onnx graph or a TorchScript archive"
    )


def _described_model(clf: Any) -> "InMemoryModel":
    """The model's kind and the name a person knows it by (its class or function, inside weakspot's adapters)."""
    from weakspot.models.adapters import SklearnClassifier, TorchClassifier
    from weakspot.models.exported import OnnxClassifier
    from weakspot.targets import InMemoryModel

    clf = getattr(clf, "inner", clf)  # a table model: the estimator inside
    kind: Literal["torch", "sklearn", "callable", "onnx"] = "callable"  # a function x -> probabilities
    if isinstance(clf, TorchClassifier):
        kind = "torch"
    elif isinstance(clf, SklearnClassifier):
        kind = "sklearn"
    elif isinstance(clf, OnnxClassifier):
        return InMemoryModel("onnx", clf.source)
    inner = getattr(clf, "estimator", None) or getattr(clf, "module", None) or getattr(clf, "fn", None) or clf
    return InMemoryModel(kind, getattr(inner, "__name__", type(inner).__name__))


def _missing_note(test: Dataset) -> str:
    """``"; missing values (kept as NaN): income 10% of rows"`` for a table of test rows with any, else empty."""
    from weakspot.data.missing import describe_missing, missing_shares

    shares = {} if test.is_image else missing_shares(test.X, test.feature_names or [])
    return f"; missing values (kept as NaN, never imputed): {describe_missing(shares)}" if shares else ""


def describe_target(
    clf: Any, test: Dataset, train: Optional[Dataset], unlabelled: Optional[Dataset]
) -> "InMemoryTarget":
    """The :class:`~weakspot.targets.InMemoryTarget` of a model and data given in process: what the methods ask of a
    target (modality, white-box, training rows given) and what the report says of it, with no params.yaml entry."""
    from weakspot.targets import InMemoryTarget

    what = "images" if test.is_image else "rows"
    parts = [f"{len(test)} test {what}"] + [
        f"{len(ds)} {name} {what}" for name, ds in (("training", train), ("unlabelled", unlabelled)) if ds is not None
    ]
    return InMemoryTarget(
        modality="image" if test.is_image else "tabular",
        model=_described_model(clf),
        has_train=train is not None,
        data=", ".join(parts) + " given to weakspot.audit" + _missing_note(test),
    )


@dataclass
class Audit:
    """What :func:`audit` found: every method's findings in one table, metrics, and the report's sections."""

    name: str
    findings: Any
    metrics: Dict[str, Dict[str, Any]]
    skipped: Dict[str, str]
    results: Dict[str, Any] = field(repr=False, default_factory=dict)
    target: Any = field(repr=False, default=None)

    @property
    def weak_spots(self) -> Any:
        """The confirmed findings of every method (after the correction over every candidate of the target, the
        pipeline's family: :func:`weakspot.findings.correct_by_target`), by kind
        (``finds``: natural errors, then fragility under attack) and within each the regions before the class alone
        (:data:`weakspot.findings.LABEL_ONLY`), each by the adjusted lower bound of the lift (the report's verdict)."""
        from weakspot.findings import LABEL_ONLY, correct_by_target
        from weakspot.methods import FINDS, finds_of

        df = correct_by_target({(self.name, "audit"): self.findings})[(self.name, "audit")]
        df = df[df["confirmed"].astype(bool)]
        df = df.assign(finds=[finds_of(m) for m in df["method"]])  # each kind ranked on its own, natural first
        order = {k: i for i, k in enumerate(FINDS)}
        df = df.assign(_kind=df["finds"].map(order), _label=df["kind"].astype(str).isin(LABEL_ONLY))
        return (
            df.sort_values(["_kind", "_label", "lift_lo_adjusted"], ascending=[True, True, False], kind="stable")
            .drop(columns=["_kind", "_label"])
            .reset_index(drop=True)
        )

    def to_html(self, path: "str | Path", title: str = "weakspot audit") -> Path:
        """Write the report (the pipeline's page for this one target) to ``path``; returns the path."""
        from weakspot.io import write_text
        from weakspot.report import inputs

        sections, figures, tables = _sections(self.name, self.results)
        inp = inputs.report_input(
            {self.name: self.target.params},
            sections=sections,
            figures=figures,
            tables=tables,
            metrics={f"{s}/{self.name}": r.metrics for s, r in self.results.items()},
            findings={
                (self.name, m): self.findings[self.findings["method"] == m].drop(columns=["method"])
                for m in self.results
                if m != "train"
            },
            not_run={(self.name, m): why for m, why in self.skipped.items()},
            title=title,
            run_info={"run": "weakspot.audit (in this process)", "target": self.name},
        )
        return write_text(Path(path), inp.render())


def _sections(name: str, results: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], Dict[str, bytes], Dict[str, Any]]:
    """The report's sections (as the pipeline's ``section.json`` holds them), figures (PNG bytes) and tables of the
    stage results ``results`` of target ``name``."""
    sections: List[Dict[str, Any]] = []
    figures: Dict[str, bytes] = {}
    tables: Dict[str, Any] = {}
    for order, (stage, result) in enumerate(results.items()):
        key = f"{stage}/{name}"
        for fig_name, fig in result.figures.items():
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=110)
            figures[f"{key}/{fig_name}"] = buf.getvalue()
        tables.update({f"{key}/{t}": table for t, table in result.tables.items()})
        sections.append(result.section(stage, name, order, {}))
    return sections, figures, tables


def audit(
    model: Any,
    X_test: Any,
    y_test: Any,
    X_train: Any = None,
    y_train: Any = None,
    *,
    methods: Optional[Sequence[str]] = None,
    params: Optional[Dict[str, Any]] = None,
    classes: Optional[Sequence[Any]] = None,
    name: str = "model",
    class_of_interest: Any = None,
    device: str = "auto",
    progress: bool = False,
    X_unlabelled: Any = None,
    outputs: Outputs = "logits",
) -> Audit:
    """Audit ``model`` on ``X_test``/``y_test`` (rows it never trained on) with every method that fits.

    Parameters
    ----------
    model : torch.nn.Module, fitted scikit-learn estimator, function x -> probabilities, onnxruntime session, or path
        The model under audit (a torch module is white-box, a TorchScript one too); a path names a ``.onnx`` graph
        (black-box) or a TorchScript ``.pt``/``.pth`` archive.
    X_test, y_test : array or DataFrame, and labels
        The evaluation rows (a DataFrame's text columns reach the model as text) and their labels (names or codes).
    X_train, y_train : array or DataFrame, and labels, optional
        The rows the model trained on: only the distribution-modelling methods use them.
    methods : list of str, optional
        Names to run (default: every method that fits); one that does not fit raises a ConfigError.
    params : dict, optional
        params.yaml's content or its method sections (``{"gad": {...}}``); missing sections: defaults.
    classes : list, optional
        The model's class names in its output order (default: ``model.classes_``, or the sorted labels).
    name : str
        The target's name (it seeds GAD, as a target's name does in the pipeline).
    class_of_interest : str or int, optional
        GAD's class (name or code; default code 1).
    device : str
        ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
    progress : bool
        Print each method's progress.
    X_unlabelled : array or DataFrame, optional
        Production rows without labels (a table): GAD's to-label list ranks them.
    outputs : {"logits", "probs"}
        What a torch module's, a TorchScript module's or an ONNX graph's single output holds: ``logits`` (softmaxed)
        or ``probs`` (taken as they are), as ``outputs:`` in params.yaml. A classifier graph's probability output
        (skl2onnx's) is read as probabilities either way; estimators and functions give probabilities.

    Returns
    -------
    Audit
        ``findings`` (every method's, with a ``method`` column), ``weak_spots`` (confirmed after the correction over
        every candidate, by the adjusted lower bound of the lift), ``metrics``,
        ``skipped`` (method -> why it did not run) and ``to_html(path)``.
    """
    import pandas as pd

    from weakspot import methods as registry
    from weakspot.config import validate_section
    from weakspot.data.prepare import resolve_class
    from weakspot.evaluate import target_section
    from weakspot.findings import normalise
    from weakspot.methods import AuditTarget
    from weakspot.progress import printer
    from weakspot.runtime import Runtime

    from weakspot.models.table import for_data

    labels = _classes_of(model, y_test, classes)
    cats = text_columns(X_test, X_train, X_unlabelled)
    test = as_dataset(X_test, y_test, labels, what="X_test", categories=cats)
    if (X_train is None) != (y_train is None):
        raise ConfigError("weakspot.audit: give both X_train and y_train, or neither")
    train = (
        as_dataset(X_train, y_train, labels, what="X_train", categories=cats)
        if X_train is not None
        else test.subset(np.arange(0))
    )
    unlabelled = None
    if X_unlabelled is not None:
        if test.is_image:
            raise DataError("X_unlabelled: production rows are ranked by GAD, which audits tables; the data are images")
        unlabelled = as_dataset(
            X_unlabelled,
            np.full(len(X_unlabelled), labels[0], dtype=object),
            labels,
            what="X_unlabelled",
            categories=cats,
        )
    clf = for_data(as_classifier(model, len(labels), device, outputs), test, trained_here=False)
    t = describe_target(clf, test, train if X_train is not None else None, unlabelled)
    coi = resolve_class(1 if class_of_interest is None else class_of_interest, test.classes)
    raw = dict(params or {})
    fits = registry.fits(t)
    chosen = list(methods) if methods is not None else [m for m, why in fits.items() if why is None]
    for m in chosen:
        if fits.get(m, "unknown method") is not None:
            raise ConfigError(f"method {m} does not run on this model: {fits.get(m, 'unknown method')}")
    digest = hashlib.sha256(
        test.X.tobytes()
        + test.y.tobytes()
        + train.X.tobytes()
        + (b"" if unlabelled is None else b"unlabelled" + unlabelled.X.tobytes())
    ).hexdigest()
    target = AuditTarget(
        name=name,
        model=clf,
        classes=test.classes,
        test=test,
        val=test.subset(np.arange(0)),
        train=train,
        unlabelled=unlabelled,
        params=t,
        spec={"kind": t.model.kind, "name": t.model.described, "classes": test.classes},
        info={
            "kind": "named",
            "log_mae": True,
            "class_of_interest": coi,
            "trains": False,
            "class_of_interest_name": test.classes[coi],
        },
        digest=digest,
    )
    results = {
        "train": target_section(
            name, clf, train, target.val, test, spec={"kind": t.model.kind, "name": t.model.described}
        )
    }
    frames, metrics = [], {"train": results["train"].metrics}
    for m in chosen:
        meta = registry.get(m)
        section = validate_section(m, raw, "weakspot.audit params", name)  # with per_target.<name> overrides
        runtime = Runtime(
            device=device,
            progress=printer(f"{m}-{name}") if progress else None,
            sections={s: validate_section(s, raw, "weakspot.audit params") for s in meta.reads},
        )
        out = registry.run_method(meta, target, section, runtime)
        results[m], metrics[m] = out.section, out.section.metrics
        frames.append(normalise(out.findings, where=f"{m}-{name}").assign(method=m))
    findings = pd.concat(frames, ignore_index=True) if frames else normalise(None).assign(method=[])
    skipped = {m: why for m, why in fits.items() if why is not None}
    skipped.update(
        {
            m: f"not asked for (methods={list(methods)})"
            for m in fits
            if methods is not None and m not in chosen and m not in skipped
        }
    )
    return Audit(name=name, findings=findings, metrics=metrics, skipped=skipped, results=results, target=target)
