"""Methods of audit as plug-ins: what a method is, what it is given, what it hands back, and how one is found.

Caveats first: a method is a package that registers itself when imported, and nothing imports every method eagerly.
The names of the methods are found without importing them (:func:`available`): every subpackage of ``weakspot`` that
has a ``run.py``, and every ``weakspot.methods`` entry point of an installed package; :func:`get` imports one method's
package (its ``__init__`` and ``config``) and nothing else. A stage that runs one method therefore loads that
method's code only, so a change to another method's code reruns none of its stages.

A method package::

    weakspot/<name>/
      __init__.py   register_method(Method(name, title, paper, params=<Name>Params, ..., stage=StageSpec(...))): what it
                    computes and needs of a target; what the pipeline and the report need of it (:class:`StageSpec`)
      config.py     its params.yaml section (pydantic, extra="forbid"; each default cites the paper or says "ours")
      run.py        run(target, params, runtime) -> a result dataclass (no prose, no matplotlib, no files)
      report.py     report(result, params, target) -> MethodReport (metrics, tables, prose, findings)   [optional]
      figures.py    figures(result, params, target) -> {name: matplotlib Figure}                      [optional]

Without ``report.py`` the ``run`` entry point returns the :class:`MethodReport` itself. :func:`run_method` runs the
three in turn; the pipeline's generic stage (``python -m flows.method <method> <target>``) calls it and writes what
comes back. A method may also declare stages shared by every target (:class:`SharedStage`, the examiner's study):
:func:`run_shared` runs one, the pipeline's generic shared stage (``python -m flows.shared <method> <stage>``) calls
it.

Example
-------
>>> from weakspot import methods
>>> "gad" in methods.available()
True
>>> methods.get("gad").modalities
('tabular',)
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from weakspot.errors import ConfigError, WeakspotError
from weakspot.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    from weakspot.result import StageResult
    from weakspot.targets import TargetDescription

#: The entry-point group through which an installed package adds a method (``name = "pkg.module"``).
ENTRY_POINTS = "weakspot.methods"


#: the two kinds of weak spot, by the failure their evidence counts (:attr:`Method.finds`), as the report names them
FINDS = {"natural": "fails on natural inputs", "attack": "fragile under attack"}


@dataclass(frozen=True)
class SharedStage:
    """A stage of a method that runs once per audit on no target of its own (the examiner's study), as the pipeline
    builds and runs it (``python -m flows.shared <method> <name>``, :func:`run_shared`).

    Parameters
    ----------
    name : str
        The stage's name (``metrics/<name>.json``, ``plots/<name>/``), distinct from every ``<method>-<target>``.
    key : str
        The key of the method's params section that holds its settings (e.g. ``study``). The stage runs when the
        section is in params.yaml and the settings' ``enabled`` (a field or a property) is true.
    run : str
        ``"module:function"``: ``run(inputs, params, runtime)``, ``inputs`` a :class:`SharedInputs`, ``params`` the
        method's whole section (no target's ``per_target`` entry).
    report, figures : str or None
        ``"module:function"`` turning run's result into a :class:`~weakspot.result.StageResult`
        (``report(result, params)``; without it ``run`` returns the StageResult) and into ``{name: Figure}``
        (``figures(result, params)``).
    skip_keys : tuple of str
        Keys of the section it does not read (e.g. the per-target examination's budget): no DVC params of the stage.
        It reads ``key`` and every other key but ``per_target``.
    scene : bool
        Reads the rendered scene data set (the ``render`` stage's output).
    model_key : str or None
        A key of its settings that may name a target whose trained model it is given (``SharedInputs.target``; with
        ``scene``, a target of rendered scenes).
    target_keys : tuple of str
        Keys of that target it reads besides its model (e.g. ``class_map``): DVC params.
    order : int
        Where its section stands in the report (lower first).
    headline : tuple of str
        Its headline metrics in ``metrics/<name>.json`` (:mod:`tasks.headline`: shell patterns over the dotted keys).
    """

    name: str
    key: str
    run: str
    report: Optional[str] = None
    figures: Optional[str] = None
    skip_keys: Tuple[str, ...] = ()
    scene: bool = False
    model_key: Optional[str] = None
    target_keys: Tuple[str, ...] = ()
    order: int = 50
    headline: Tuple[str, ...] = ()

    def modules(self) -> List[str]:
        """The modules of its entry points (``run``, ``report``, ``figures``): what its stage imports."""
        return [ref.split(":")[0] for ref in (self.run, self.report, self.figures) if ref]


#: a curve table of a method's section declared as DVC plots: (table, x column, y columns; ``"params:<key>"`` = the
#: columns the list in that key of the section names)
Plot = Tuple[str, str, Tuple[str, ...]]


@dataclass(frozen=True)
class StageSpec:
    """What the pipeline and the report need of a method besides what it computes: the DVC params, outputs and plots
    of its ``<method>-<target>`` stages, its headline metrics, where it stands in the report and its shared stages.
    Declared in the package's ``register_method(Method(..., stage=StageSpec(...)))``, so a change to it reruns that
    method's stages only.

    Parameters
    ----------
    order : int
        Where its sections stand in the report (lower first).
    target_keys : tuple of str
        Keys of ``targets.<t>`` the method reads besides the data and the model (e.g. ``train``): DVC params.
    skip_keys : tuple of str
        Keys of its own section its per-target stage does not read (a shared stage's keys, e.g. ``study``).
    outputs : tuple of str
        Extra products it writes next to its findings (``findings/<t>/<name>_<output>``).
    repairs : bool
        It may return a repaired copy of the model (``data/targets/<t>/repaired_<name>/``).
    plots : tuple of (table, x, y columns)
        Tables of its section that are curves, declared in dvc.yaml's ``plots``; a y entry ``"params:<key>"`` expands
        to the list its section holds in that key.
    headline : tuple of str
        Its headline metrics in ``metrics/<name>/<t>.json`` (:mod:`tasks.headline`: shell patterns over the dotted
        keys; the rest in ``results.json``), besides its section's key metrics.
    shared : tuple of SharedStage
        Its stages shared by every target (e.g. the examiner's study).
    """

    order: int = 50
    target_keys: Tuple[str, ...] = ()
    skip_keys: Tuple[str, ...] = ()
    outputs: Tuple[str, ...] = ()
    repairs: bool = False
    plots: Tuple[Plot, ...] = ()
    headline: Tuple[str, ...] = ()
    shared: Tuple[SharedStage, ...] = ()

    def shared_stage(self, name: str) -> SharedStage:
        """The shared stage ``name``; a ConfigError lists the method's shared stages."""
        for s in self.shared:
            if s.name == name:
                return s
        raise ConfigError(
            f"no shared stage {name!r}; shared stages: {', '.join(s.name for s in self.shared) or 'none'}"
        )


@dataclass(frozen=True)
class Method:
    """A method of audit: what it computes and what it needs of a target.

    Parameters
    ----------
    name : str
        The key in params.yaml, in stage names (``<name>-<target>``), metrics and findings; the package's name.
    title, paper : str
        The report's section heading and the paper it implements (``seeds/00N (...)``).
    params : type
        The pydantic model of its params.yaml section.
    run : str
        ``"module:function"``: ``run(target, params, runtime)``; :func:`run_method` calls it.
    report, figures : str or None
        ``"module:function"`` turning run's result into a :class:`MethodReport`, and into ``{name: Figure}``.
    modalities : tuple of str
        ``image`` and/or ``tabular``.
    white_box, scene : bool
        Needs gradients (a torch model); needs a scene it can render (the examiner).
    needs_train : bool
        Models the data distribution or retrains the model, so needs the rows the model was trained on (never
        judged on them): it does not run on a model whose training rows the target does not give.
    reads : tuple of str
        Other params sections it reads (e.g. HDA the ``intrinsic`` section, whose min-max model it shares).
    finds : str
        What its weak spots are, the one failure definition of its evidence: ``"natural"`` (the model's errors on
        real held-out inputs or fresh renders) or ``"attack"`` (inputs the model gets right that an attack of a stated
        budget turns wrong). The two kinds rank apart: their lifts have different ceilings.
    stage : StageSpec
        What the pipeline and the report need of it: report order, DVC params and outputs, plots, headline metrics,
        shared stages.
    """

    name: str
    title: str
    paper: str
    params: type
    run: str
    report: Optional[str] = None
    figures: Optional[str] = None
    modalities: Tuple[str, ...] = ("image", "tabular")
    white_box: bool = False
    scene: bool = False
    needs_train: bool = False
    reads: Tuple[str, ...] = ()
    finds: str = "natural"
    stage: StageSpec = StageSpec()

    def __post_init__(self) -> None:
        if self.finds not in FINDS:
            raise ValueError(f"method {self.name}: finds={self.finds!r}; valid: {', '.join(FINDS)}")

    def misfit(self, target: "TargetDescription") -> Optional[str]:
        """Why this method does not run on ``target`` (``None`` when it does)."""
        if target.methods is not None and self.name not in target.methods:
            return f"the target lists methods {target.methods} only"
        if target.modality not in self.modalities:
            return f"needs {' or '.join(self.modalities)} data; the target's data are {target.modality}"
        if self.white_box and not target.white_box:
            return (
                f"needs gradients (a torch or TorchScript model); the target's {target.model.kind} model is a black "
                "box (no gradients)"
            )
        if self.needs_train and not target.has_train:
            return (
                "needs the rows the model was trained on (data.train) to model the data distribution; this "
                "target gives evaluation data only"
            )
        if self.scene and not target.renderable:
            return "needs a scene it can render (data source 'scenes', or a class_map onto the scene's classes)"
        return None

    def modules(self) -> List[str]:
        """The modules of its entry points (``run``, ``report``, ``figures``): what its stage imports."""
        return [ref.split(":")[0] for ref in (self.run, self.report, self.figures) if ref]


#: The fields a method declared on ``Method`` itself before they moved to :class:`StageSpec`.
_MOVED_TO_STAGE = frozenset(f.name for f in fields(StageSpec))
_method_init = Method.__init__


def _checked_init(self: Method, *args: Any, **kwargs: Any) -> None:
    moved = sorted(set(kwargs) & _MOVED_TO_STAGE)
    if moved:
        given = ", ".join(f"{k}=..." for k in moved)
        raise TypeError(
            f"Method({kwargs.get('name', args[0] if args else '?')!r}, ...): {', '.join(moved)} belong to what the "
            f"pipeline needs of the method: declare them as Method(..., stage=StageSpec({given})) "
            "(docs/contributing/adding-a-method.md)"
        )
    _method_init(self, *args, **kwargs)


Method.__init__ = _checked_init  # type: ignore[method-assign]

METHODS = Registry("method")


def register_method(method: Method) -> Method:
    """Register ``method`` (called by its package's ``__init__``); registering a name twice is an error."""
    METHODS.register(method.name)(method)
    return method


# ------------------------------------------------------------------------------------------ finding methods


def _entry_points() -> Dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINTS)}


def _builtin() -> List[str]:
    """Subpackages of ``weakspot`` with a ``run.py``: found on disk, none imported."""
    root = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(root)]) if m.ispkg and (root / m.name / "run.py").is_file())


def available() -> List[str]:
    """The names of every method (built-in packages and entry points), without importing any."""
    return sorted(set(_builtin()) | set(_entry_points()))


def package_of(name: str) -> str:
    """The module whose import registers method ``name`` (its package); a ConfigError lists the names."""
    module = f"weakspot.{name}" if name in _builtin() else _entry_points().get(name)
    if module is None:
        raise ConfigError(f"unknown method {name!r}; methods: {', '.join(available()) or '(none)'}")
    return module


def get(name: str) -> Method:
    """The registered method ``name``, importing its package (and only it) first; a ConfigError lists the names."""
    if name not in METHODS:
        importlib.import_module(package_of(name))
    return METHODS.get(name)


def finds_of(name: str) -> str:
    """The kind of weak spot method ``name``'s findings are (:attr:`Method.finds`); ``"natural"`` for a name this
    install does not know (a findings file of a method since removed: its findings are the model's errors)."""
    try:
        return get(name).finds
    except (WeakspotError, ImportError):
        return "natural"


def all_methods() -> List[Method]:
    """Every method, imported, in report order (then by name)."""
    return sorted((get(n) for n in available()), key=lambda m: (m.stage.order, m.name))


def shared_stages() -> List[Tuple[Method, SharedStage]]:
    """Every method's shared stages (:attr:`StageSpec.shared`), each with its method, in report order."""
    return [(m, s) for m in all_methods() for s in m.stage.shared]


def fits(target: "TargetDescription") -> Dict[str, Optional[str]]:
    """Method name -> ``None`` (runs on the target) or the reason it does not, for every method, in report order."""
    return {m.name: m.misfit(target) for m in all_methods()}


def resolve(ref: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` reference names."""
    module, _, attr = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"entry point {ref!r} cannot be loaded: {exc}") from None


# ------------------------------------------------------------------------------------------ what a method is given


@dataclass
class SceneData:
    """The rendered scene data set (the ``render`` stage's output) and the settings that rendered it."""

    images: Any
    table: Any
    settings: Dict[str, Any]


@dataclass
class AuditTarget:
    """What a method is given of the model under audit.

    Parameters
    ----------
    name : str
        The target's name.
    model : Classifier
        ``predict_proba``; a :class:`~weakspot.models.TorchClassifier` when the target is white-box.
    classes : list of str
        Class names, in the model's output order.
    test, val, train : Dataset
        The evaluation rows the model never trained on (``test``, ``val``) and what it trained on (``train``).
    unlabelled : Dataset or None
        Production rows without labels (``data.unlabelled``; their label column is a placeholder), or None.
    params : TargetParams, InMemoryTarget or None
        Its params.yaml entry (data, model, training), for methods that retrain it; a model audited from Python
        (``weakspot.audit``) is described by an :class:`~weakspot.targets.InMemoryTarget`.
    spec : dict
        How the model was built (its ``model.json``: kind, arch, input shape, classes).
    info : dict
        What the data preparation recorded (the split, a bias preset, the class of interest).
    digest : str
        A content digest of the data and the model: part of every cache key that depends on them.
    scene : SceneData or None
        The rendered scene data set, for a method that renders (``Method.scene``).
    """

    name: str
    model: Any
    classes: List[str]
    test: Any
    val: Any = None
    train: Any = None
    unlabelled: Any = None
    params: Any = None
    spec: Dict[str, Any] = field(default_factory=dict)
    info: Dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    scene: Optional[SceneData] = None


@dataclass
class MethodReport:
    """What a method hands back to its stage: the report section, the findings and any extra products.

    Parameters
    ----------
    section : StageResult
        Metrics, tables, figures, title and prose.
    findings : pandas.DataFrame or None
        The weak spots in :mod:`weakspot.findings`' shape.
    extras : dict of str -> bytes
        Products a user acts on, written next to the findings as ``<method>_<name>`` (names in ``StageSpec.outputs``).
    repaired : dict or None
        A repaired copy of the model: ``{"state_dict": bytes, "spec": {...}}`` (written when ``StageSpec.repairs``).
    lineage : dict
        What else made the numbers (models trained on the way, their settings and time): kept in the lineage.
    """

    section: "StageResult"
    findings: Any = None
    extras: Dict[str, bytes] = field(default_factory=dict)
    repaired: Optional[Dict[str, Any]] = None
    lineage: Dict[str, Any] = field(default_factory=dict)


def run_method(method: "Method | str", target: AuditTarget, params: Any, runtime: Any) -> MethodReport:
    """Run ``method`` on ``target``: its ``run``, then its ``report`` and ``figures`` on the result.

    ``runtime`` is a :class:`weakspot.runtime.Runtime` (in-process) or the pipeline's (cached, on Dask).
    """
    m = get(method) if isinstance(method, str) else method
    result = resolve(m.run)(target, params, runtime)
    if m.report is None:
        if not isinstance(result, MethodReport):
            raise WeakspotError(
                f"method {m.name}: {m.run} returned {type(result).__name__}; without a report entry "
                "point it must return a MethodReport"
            )
        out = result
    else:
        out = resolve(m.report)(result, params, target)
    if m.figures is not None:
        out.section.figures.update(resolve(m.figures)(result, params, target))
    unknown = sorted(set(out.extras) - set(m.stage.outputs))
    if unknown:
        raise WeakspotError(
            f"method {m.name}: extra products {unknown} are not declared in StageSpec.outputs {list(m.stage.outputs)}"
        )
    out.section.check()
    return out


# ------------------------------------------------------------------------------------------ a shared stage


@dataclass
class SharedInputs:
    """What a method's shared stage (:class:`SharedStage`) is given.

    Parameters
    ----------
    scene : SceneData or None
        The rendered scene data set, for a stage that reads it (``SharedStage.scene``).
    target : AuditTarget or None
        The target its settings name (``SharedStage.model_key``): its model, classes, params and spec, no data
        (``test`` is None); None when they name none.
    """

    scene: Optional[SceneData] = None
    target: Optional[AuditTarget] = None


def run_shared(method: "Method | str", stage: str, inputs: SharedInputs, params: Any, runtime: Any) -> "StageResult":
    """Run the shared stage ``stage`` of ``method``: its ``run``, then its ``report`` and ``figures`` on the result.

    ``params`` is the method's validated section; ``runtime`` as for :func:`run_method`.
    """
    from weakspot.result import StageResult

    m = get(method) if isinstance(method, str) else method
    s = m.stage.shared_stage(stage)
    result = resolve(s.run)(inputs, params, runtime)
    if s.report is None:
        if not isinstance(result, StageResult):
            raise WeakspotError(
                f"method {m.name}, stage {s.name}: {s.run} returned {type(result).__name__}; without a report entry "
                "point it must return a StageResult"
            )
        out = result
    else:
        out = resolve(s.report)(result, params)
    if s.figures is not None:
        out.figures.update(resolve(s.figures)(result, params))
    out.check()
    return out
