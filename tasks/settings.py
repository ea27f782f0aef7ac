"""params.yaml's ``history``, ``gates`` and ``execution`` sections: how audits are compared and kept, the conditions
every audit must meet, and where a stage's tasks run; and the readers of params.yaml that know them.

The pipeline and the operations read params.yaml with :func:`check_params`, :func:`load_section` and
:func:`validate_section` from here (:mod:`weakspot.config`'s, with these three sections registered by this module), so
no module imports this one only for the registration.

Caveats first: the library does not know these sections, so :func:`weakspot.config.check_params` refuses a params.yaml
that holds them unless this module was imported first (``weakspot check`` and ``weakspot audit`` import it, and so do
the report stage and ``tasks/runner.py``, the modules that read them). Neither section is a DVC param of any stage but
the report (``history.dir``, ``history.rules``): ``execution`` says where the tasks run, never what they compute.
"""

from __future__ import annotations

from typing import Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from weakspot.config import check_params, load_section, register_section, validate_section


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class RuleParams(BaseModel):
    """One regression rule of the audit history (:mod:`ops.verdict.history`)."""

    model_config = ConfigDict(extra="forbid")
    metric: str = Field(..., description="<stage>/<target>:<dotted.key>, shell wildcards allowed")
    exclude: Optional[str] = Field(None, description="metrics the pattern matches but the rule skips (wildcards)")
    worse: Literal["up", "down", "new"]
    tolerance: float = Field(0.0, ge=0)
    relative: bool = False


class HistoryParams(BaseModel):
    """params.yaml ``history`` section."""

    model_config = ConfigDict(extra="forbid", validate_default=True)
    dir: str = "history"
    #: The DVC remote that `weakspot audit --push` (the nightly flow) pushes every output to: a local folder
    #: (relative to the repository) or any URL DVC knows (s3://, gs://, ssh://... with DVC's plugin installed).
    #: The environment variable WEAKSPOT_DVC_REMOTE overrides it.
    remote: str = ".dvc-store"
    fail_on_regression: bool = True
    rules: List[RuleParams] = Field(default_factory=list)


class WeakSpotGate(BaseModel):
    """A gate on the confirmed weak spots (held-out confirmation against a control, corrected over the audit) of the audit's findings."""

    model_config = ConfigDict(extra="forbid")
    max_lift: Optional[float] = Field(None, gt=0, description="fail when a confirmed weak spot's lift is above it")
    max_count: Optional[int] = Field(None, ge=0, description="fail when more weak spots than this are confirmed")
    methods: str = Field("*", description="which methods' findings (shell wildcards)")
    targets: str = Field("*", description="which targets' findings (shell wildcards)")

    @model_validator(mode="after")
    def _one(self) -> "WeakSpotGate":
        if self.max_lift is None and self.max_count is None:
            raise ValueError("a weak_spots gate needs max_lift or max_count")
        return self


class GateParams(BaseModel):
    """One absolute condition every audit must meet: ``{metric, op, value}`` on the audit's metrics (the names of
    history.rules, shell wildcards: each match must hold), or ``{weak_spots: {max_lift | max_count}}``."""

    model_config = ConfigDict(extra="forbid")
    metric: Optional[str] = Field(None, description="<stage>/<target>:<dotted.key>, shell wildcards allowed")
    op: Optional[Literal[">=", ">", "<=", "<", "==", "!="]] = None
    value: Optional[float] = None
    weak_spots: Optional[WeakSpotGate] = None
    name: Optional[str] = Field(None, description="how the conditions summary and junit.xml name it")

    @model_validator(mode="after")
    def _kind(self) -> "GateParams":
        on_metric = (self.metric, self.op, self.value)
        if self.weak_spots is not None and any(v is not None for v in on_metric):
            raise ValueError("a gate is either {metric, op, value} or {weak_spots: ...}, not both")
        if self.weak_spots is None and any(v is None for v in on_metric):
            raise ValueError(
                "a metric gate needs metric, op and value (e.g. {metric: 'train/*:test_accuracy', "
                "op: '>=', value: 0.9}), or use {weak_spots: {max_lift: 3}}"
            )
        return self


class GatesParams(_Section):
    """params.yaml ``gates`` section: conditions checked after every audit, the first one too (:mod:`ops.verdict.gates`).
    A failed gate exits 3 like a regression (with ``fail``) and shows in the report's conditions summary,
    ``reports/junit.xml`` and ``reports/summary.md``."""

    fail: bool = True
    conditions: List[GateParams] = Field(default_factory=list)


class ExecutionParams(_Section):
    """How the stages run their fan-outs (:mod:`tasks.runner`): not what they compute. The results are the same either
    way, so this section is no stage's DVC param: changing the runner or the cluster reruns nothing."""

    runner: Literal["sequential", "dask"] = Field(
        "sequential", description="sequential: one task at a time in the stage's process; dask: Dask workers"
    )
    address: Optional[str] = Field(
        None,
        description="an existing Dask scheduler (tcp://host:8786); null = a local cluster. The environment "
        "variable WEAKSPOT_DASK_ADDRESS overrides it and implies runner: dask",
    )
    n_workers: int = Field(2, ge=1, le=1024, description="the local cluster's worker processes")
    threads_per_worker: int = Field(
        1,
        ge=1,
        le=256,
        description="the local cluster's tasks at a time per worker: "
        "keep 1 (tasks side by side share torch's global "
        "random state)",
    )
    workers: int = Field(
        3,
        ge=0,
        le=64,
        description="local process workers `weakspot audit` starts on the cpu pool: stages that do not "
        "need each other's outputs run side by side, one per worker (0: only workers "
        "started elsewhere with `weakspot worker`)",
    )
    in_checkout: bool = Field(
        False,
        description="true: `weakspot audit` runs the stages with plain `dvc repro --keep-going` in this checkout, "
        "one at a time, on the audit's Prefect server: no workers and no clones (a failed stage stops only the stages "
        "that need it, as on workers). For debugging a stage, or a small audit where a worker's cost per stage (a "
        "flow-run process, a clone, DVC in it: about 5 s of CPU) outweighs running stages side by side. The outputs "
        "are the same bytes",
    )
    gpu_workers: Optional[int] = Field(
        None,
        ge=0,
        le=64,
        description="local process workers on the gpu pool; null: 1 when this machine has CUDA, else 0",
    )
    pools: Dict[str, List[str]] = Field(
        default_factory=dict,
        description="pool -> the steps (prepare, train, render, a method) whose stages run "
        "there when the pool has a worker, e.g. {gpu: [intrinsic, corner]}; the gpu "
        "pool's default: the methods that need gradients",
    )
    retries: int = Field(
        1,
        ge=0,
        le=10,
        description="times a task whose Dask worker died, or a stage whose worker "
        "died, is resubmitted before it fails naming it",
    )
    heartbeat_seconds: int = Field(
        30,
        ge=30,
        le=3600,
        description="seconds between a flow run's heartbeats (Prefect's PREFECT_FLOWS_HEARTBEAT_FREQUENCY, at least "
        "30): a stage whose flow run misses three is marked Crashed by Prefect (its worker or machine was lost) and "
        "run again on a live worker (ops/engine/lost.py)",
    )
    resources: Dict[str, float] = Field(
        default_factory=dict,
        description="Dask worker resources every fan-out task asks for, e.g. {GPU: 1}: only "
        "workers started with `dask worker --resources GPU=1` run them, one task "
        "per unit at a time (an existing cluster only)",
    )

    @field_validator("resources")
    @classmethod
    def _resources(cls, v: Dict[str, float]) -> Dict[str, float]:
        bad = {k: n for k, n in v.items() if not k or n <= 0}
        if bad:
            raise ValueError(f"{bad}: name -> a positive amount, as `dask worker --resources NAME=AMOUNT` declares it")
        return v

    @field_validator("pools")
    @classmethod
    def _pools(cls, v: Dict[str, List[str]]) -> Dict[str, List[str]]:
        bad = [k for k in v if k not in ("cpu", "gpu")]
        if bad:
            raise ValueError(f"unknown pool(s) {bad}: the pools are cpu and gpu")
        return v

    @field_validator("address")
    @classmethod
    def _address(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (not v.strip() or any(c.isspace() for c in v)):
            raise ValueError("a Dask scheduler address such as tcp://host:8786, or null for a local cluster")
        return v

    @model_validator(mode="after")
    def _address_needs_dask(self) -> "ExecutionParams":
        if self.address is not None and self.runner != "dask":
            raise ValueError(
                f"address {self.address!r} is set but runner is {self.runner!r}: set runner: dask (or address: null)"
            )
        return self


register_section("history", HistoryParams)
register_section("gates", GatesParams)
register_section("execution", ExecutionParams)

__all__ = [
    "ExecutionParams",
    "GateParams",
    "GatesParams",
    "HistoryParams",
    "RuleParams",
    "check_params",
    "load_section",
    "validate_section",
]
