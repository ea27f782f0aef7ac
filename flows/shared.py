"""Stage ``<stage>``: a method's stage shared by every target (``python -m flows.shared METHOD STAGE``), as the method
declares it (:class:`weakspot.methods.SharedStage`; the examiner's study is one).

Reads and validates the method's section once, gives the stage what it declares it reads (the rendered scenes, the
model of the target its settings name: :class:`weakspot.methods.SharedInputs`), runs it with the pipeline's runtime
(:func:`weakspot.methods.run_shared`) and writes ``metrics/<stage>.json`` and the report section under
``plots/<stage>/``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from prefect import flow

from tasks import paths
from tasks.common import PARAMS_FILE, lineage, stage_main, write_stage_result
from tasks.method import PipelineRuntime, load_shared_inputs
from weakspot import methods
from weakspot.config import target_of, validate_section, validate_top_level
from weakspot.progress import printer


@flow(name="shared", validate_parameters=False)
def shared_flow(
    method: str, stage: str, top: Dict[str, Any], p: Any, target: Optional[Tuple[str, Any]]
) -> Dict[str, Any]:
    m = methods.get(method)
    s = m.stage.shared_stage(stage)
    inputs, read = load_shared_inputs(s, target, top["device"])
    runtime = PipelineRuntime(device=top["device"], progress=printer(stage))
    result = methods.run_shared(m, stage, inputs, p, runtime)
    lin = lineage(stage, top, p, read, section=method)
    write_stage_result(stage, result, lin, order=s.order, headline=s.headline)
    print(f"{stage}: done -> {paths.metrics(stage)}")
    return result.metrics


def _load(raw: Dict[str, Any], argv: List[str]) -> Tuple[Any, ...]:
    from weakspot.errors import WeakspotError

    if len(argv) != 2:
        stages = [f"{m.name} {s.name}" for m, s in methods.shared_stages()]
        raise WeakspotError(f"usage: python -m flows.shared METHOD STAGE; shared stages: {', '.join(stages) or 'none'}")
    method, stage = argv
    s = methods.get(method).stage.shared_stage(stage)
    p = validate_section(method, raw, PARAMS_FILE)
    name = getattr(getattr(p, s.key), s.model_key) if s.model_key else None
    target = (name, target_of(name, raw, PARAMS_FILE)) if name else None
    return method, stage, validate_top_level(raw, PARAMS_FILE, every_key=False), p, target


def _named(method: str, stage: str, *args: Any) -> Any:
    return shared_flow.with_options(name=stage, flow_run_name=stage)


if __name__ == "__main__":
    stage_main(_named, _load)
