"""The generic method stage's parts: a target as a method is given it, the pipeline's runtime (every call a cached
Prefect task, fanned out on Dask where params.yaml's ``execution`` says so), and the writing of what a method hands
back (metrics, section, figures, findings, extra products, a repaired model).

Caveats first: a runtime call's cache key is derived, never written by the method (:mod:`tasks.identity`): the
stage's identity (every dep, param and package version DVC records for it), the function and the call's own
arguments (the ``key`` a method gives names only which call of a map it is: a seed, an index). So a change to
anything the stage depends on recomputes its calls, and a rerun of an unchanged stage reuses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from prefect import task

from tasks import paths
from tasks.common import combined_digest, digest, fan_out
from weakspot.config import target_of, validate_section, validate_top_level
from weakspot.methods import AuditTarget, Method, MethodReport, SceneData, SharedInputs, SharedStage, resolve
from weakspot.runtime import Runtime


@dataclass
class MethodParams:
    """What a method's stage reads of params.yaml, validated once: the top-level settings, the target, the method's
    section (with the target's ``per_target`` overrides) and the other sections it reads (``Method.reads``)."""

    top: Dict[str, Any]
    target: Any
    section: Any
    sections: Dict[str, Any] = field(default_factory=dict)


def method_params(
    method: Method, target: str, data: Mapping[str, Any], source: str = str(paths.PARAMS)
) -> MethodParams:
    """Validate the method's part of params.yaml's content ``data`` (a ConfigError names any bad key)."""
    top = validate_top_level(dict(data), source, every_key=False)
    t = target_of(target, dict(data), source)
    why = method.misfit(t)
    if why is not None:
        from weakspot.errors import ConfigError

        raise ConfigError(f"method {method.name} does not run on target {target!r}: {why}")
    section = validate_section(method.name, dict(data), source, target)
    sections = {s: validate_section(s, dict(data), source, target) for s in method.reads}
    return MethodParams(top=top, target=t, section=section, sections=sections)


def inputs_of(method: Method, target: str) -> List[Any]:
    """The artifacts a method's stage reads: the prepared splits, the model (and the rendered scenes)."""
    return [paths.prepared(target), paths.model_dir(target)] + ([paths.RENDER] if method.scene else [])


def load_audit_target(method: Method, name: str, t: Any, device: str) -> AuditTarget:
    """The target as ``method`` is given it: the model as the train stage left it, the prepared splits, what the
    preparation recorded, a digest of data and weights, and the rendered scenes for a method that renders."""
    from tasks.data import read_prepared, read_prepared_info, read_unlabelled
    from tasks.target import load_target_model

    splits = {s: read_prepared(name, s) for s in ("train", "val", "test")}
    clf, spec = load_target_model(name, device, splits["test"])
    scene = None
    if method.scene:
        from tasks.scene import read_render

        images, table, settings = read_render()
        scene = SceneData(images=images, table=table, settings=settings)
    return AuditTarget(
        name=name,
        model=clf,
        classes=[str(c) for c in spec["classes"]],
        test=splits["test"],
        val=splits["val"],
        train=splits["train"],
        unlabelled=read_unlabelled(name),
        params=t,
        spec=spec,
        info=read_prepared_info(name).get("split", {}),
        digest=combined_digest(digest([paths.prepared(name), paths.model_dir(name)])),
        scene=scene,
    )


def load_shared_inputs(
    stage: SharedStage, target: Optional[Tuple[str, Any]], device: str
) -> Tuple[SharedInputs, List[Any]]:
    """What a method's shared stage is given (the rendered scenes, the model of the target its settings name:
    ``target`` is that target's name and params, or None) and the artifacts it reads (for its lineage)."""
    from tasks.target import load_target_model

    inputs = SharedInputs()
    read: List[Any] = []
    if stage.scene:
        from tasks.scene import read_render

        images, table, settings = read_render()
        inputs.scene = SceneData(images=images, table=table, settings=settings)
        read.append(paths.RENDER)
    if target is not None:
        name, params = target
        clf, spec = load_target_model(name, device)
        classes = [str(c) for c in spec["classes"]]
        inputs.target = AuditTarget(name=name, model=clf, classes=classes, test=None, params=params, spec=spec)
        read.append(paths.model_dir(name))
    return inputs, read


# ------------------------------------------------------------------------------------------ the runtime


class Arguments:
    """A call's arguments in a box Prefect does not open: it walks lists, dicts and dataclasses among a task's
    parameters (looking for futures), which is slow on a model and its arrays; ``quote()`` would do the same in this
    process but reaches a Dask worker as nested tuples."""

    __slots__ = ("args", "kwargs")

    def __init__(self, args: Sequence[Any], kwargs: Mapping[str, Any]):
        self.args, self.kwargs = tuple(args), dict(kwargs)


def _given_key(context: Any, parameters: Dict[str, Any]) -> str:
    return parameters["key"]


@task(cache_key_fn=_given_key, persist_result=True, task_run_name="{label}")
def call(ref: str, args: "Arguments", key: str, label: str) -> Any:
    """``ref(*args, **kwargs)``: one runtime call, cached under ``key`` (see :meth:`PipelineRuntime.key`)."""
    return resolve(ref)(*args.args, **args.kwargs)


class PipelineRuntime(Runtime):
    """The pipeline's runtime: every call a cached Prefect task, fanned out by ``tasks/runner.py``."""

    @staticmethod
    def ref(fn: Callable[..., Any]) -> str:
        if "<locals>" in fn.__qualname__ or "." in fn.__qualname__:
            raise TypeError(f"{fn.__qualname__}: a runtime call takes a module-level function (workers import it)")
        return f"{fn.__module__}:{fn.__qualname__}"

    @staticmethod
    def key(ref: str, key: Mapping[str, Any]) -> str:
        """The cache key, derived (:func:`tasks.identity.call_key`): the stage's identity (its code, data, params
        and packages, as DVC records them), the function and the call's own arguments (``key``: a seed, an index)."""
        from tasks.identity import call_key

        return call_key(ref, key)

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._keys: set = set()

    def cached(self, fn: Callable[..., Any], *args: Any, key: Mapping[str, Any], label: str = "", **kwargs: Any) -> Any:
        return self.map(fn, [(args, kwargs)], keys=[key], labels=[label or fn.__name__])[0]

    def _claim(self, ref: str, key: Mapping[str, Any]) -> str:
        """The call's cache key; a second call of ``ref`` with the same ``key`` in this stage is an error (its
        arguments are not in the key: the second would be served the first's result)."""
        k = self.key(ref, key)
        if k in self._keys:
            raise ValueError(
                f"{ref}: two calls with the same key {dict(key)!r} in one stage; a call's key names which call it is "
                "(a seed, an index), so each call of a function needs its own"
            )
        self._keys.add(k)
        return k

    def map(
        self,
        fn: Callable[..., Any],
        calls: Sequence[Any],
        *,
        keys: Sequence[Mapping[str, Any]],
        labels: Optional[Sequence[str]] = None,
    ) -> List[Any]:
        if len(keys) != len(calls):
            raise ValueError(f"{len(calls)} calls but {len(keys)} keys")
        ref = self.ref(fn)
        labels = list(labels) if labels is not None else [f"{fn.__name__} #{i}" for i in range(len(calls))]
        return fan_out(
            call.with_options(name=fn.__name__),
            [
                ((ref, Arguments(a, kw), self._claim(ref, k), f"{fn.__name__}: {lab}"), {})
                for (a, kw), k, lab in zip(calls, keys, labels)
            ],
            labels=labels,
        )


# ------------------------------------------------------------------------------------------ writing


def write_method_report(
    method: Method, target: str, out: MethodReport, lin: Dict[str, Any], spec: Dict[str, Any]
) -> None:
    """A method's artifacts: its stage result and findings, its extra products and its repaired model."""
    from tasks.common import write_stage_result
    from weakspot.io import write_bytes, write_json

    for name, data in out.extras.items():
        write_bytes(paths.findings_extra(target, method.name, name), data)
    if method.stage.repairs and out.repaired is not None:
        folder = paths.repaired(target, method.name)
        extra = dict(out.repaired.get("spec") or {})
        if out.repaired.get("state_dict") is not None:
            write_bytes(folder / "model.pt", out.repaired["state_dict"])
            base = {k: v for k, v in spec.items() if k != "lineage"}
            extra = {**base, "weights": str(folder / "model.pt"), **extra}
        write_json(folder / "model.json", {**extra, "lineage": lin})
    write_stage_result(
        method.name,
        out.section,
        lin,
        target=target,
        findings=out.findings,
        order=method.stage.order,
        headline=method.stage.headline,
    )
