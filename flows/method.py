"""Stage ``<method>-<target>``: any registered method on one target (``python -m flows.method METHOD TARGET``).

Reads and validates params.yaml once (the target, the method's section with the target's overrides, the sections it
also reads), loads the model and the prepared data as the method is given them (:class:`weakspot.methods.
AuditTarget`), runs the method with the pipeline's runtime (cached Prefect tasks, Dask fan-outs) and writes what it
hands back: ``metrics/<method>/<t>.json``, the report section under ``plots/<method>/<t>/``,
``findings/<t>/<method>.parquet``, its extra products (``findings/<t>/<method>_<name>``) and, for a method that
repairs, ``data/targets/<t>/repaired_<method>/``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from prefect import flow

from tasks import paths
from tasks.common import lineage, stage_main
from tasks.method import MethodParams, PipelineRuntime, inputs_of, load_audit_target, method_params, write_method_report
from weakspot import methods
from weakspot.progress import printer


@flow(name="method", validate_parameters=False)
def method_flow(method: str, target: str, mp: MethodParams) -> Dict[str, Any]:
    m = methods.get(method)
    t = load_audit_target(m, target, mp.target, mp.top["device"])
    runtime = PipelineRuntime(device=mp.top["device"], progress=printer(f"{method}-{target}"), sections=mp.sections)
    out = methods.run_method(m, t, mp.section, runtime)
    lin = lineage(method, mp.top, mp.section, inputs_of(m, target))
    for name, section in mp.sections.items():
        lin["params"][name] = section.model_dump(mode="json")
    lin.update(out.lineage)
    write_method_report(m, target, out, lin, t.spec)
    n = 0 if out.findings is None else len(out.findings)
    print(f"{method}-{target}: {n} finding{'s' if n != 1 else ''} -> {paths.findings(target, method)}")
    return out.section.metrics


def _load(raw: Dict[str, Any], argv: List[str]) -> Tuple[Any, ...]:
    from weakspot.errors import WeakspotError

    if len(argv) != 2:
        raise WeakspotError(f"usage: python -m flows.method METHOD TARGET; methods: {', '.join(methods.available())}")
    method, target = argv
    return method, target, method_params(methods.get(method), target, raw)


def _named(method: str, target: str, mp: MethodParams) -> Any:
    return method_flow.with_options(name=method, flow_run_name=f"{method}-{target}")


if __name__ == "__main__":
    stage_main(_named, _load)
