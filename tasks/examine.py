"""Tasks of the ``train_examine`` and ``examine`` stages: target models trained on rendered scenes, examinations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from tasks.common import cached_task

from tasks.scene import read_render
from weakspot.errors import DataError
from weakspot.io import save_torch, write_json

MODELS = Path("data/examine/models")


def _progress(prefix: str):
    """A progress printer: a line when a phase starts, every ~10% of it, and when it ends (counts and rate)."""
    import time

    state = {"what": None, "next": 0, "t0": 0.0}

    def cb(what: str, done: int, total: int) -> None:
        if what != state["what"]:
            state.update(what=what, next=0, t0=time.time())
        if done >= state["next"] or done == total:
            secs = time.time() - state["t0"]
            rate = "" if secs <= 1 or not done else (f" ({done / secs:.1f}/s)" if done >= secs else f" ({secs / done:.1f} s each)")
            print(f"  {prefix}: {what} {done}/{total}{rate}", flush=True)
            state["next"] = done + max(1, total // 10)

    return cb


@cached_task
def train_models(params: Dict[str, Any], render_digest: str, code_digest: str, device: str) -> Dict[str, Dict[str, Any]]:
    """Train every target model of the ``examine`` section on the rendered training split (cached on the rendered
    data's digest, the params and the library code)."""
    from weakspot.examine import ExamineParams, train_targets

    p = ExamineParams.model_validate(params)
    images, table, _ = read_render()
    targets = train_targets(images, table, p, device=device, progress=_progress("train_examine"))
    return {name: {"arch": t.arch, "classes": t.classes, "resolution": t.resolution, "info": t.info,
                   "state": t.state()} for name, t in targets.items()}


def save_models(models: Dict[str, Dict[str, Any]], lin: Dict[str, Any]) -> None:
    index = {}
    for name, m in models.items():
        save_torch(MODELS / f"{name}.pt", m["state"])
        index[name] = {k: v for k, v in m.items() if k != "state"}
    write_json(MODELS / "index.json", {"models": index, "lineage": lin})


def load_models(device: str) -> Dict[str, Any]:
    import torch

    from weakspot.examine import TargetModel

    index_file = MODELS / "index.json"
    if not index_file.is_file():
        raise DataError(f"{index_file} not found; run the 'train_examine' stage first")
    index = json.loads(index_file.read_text())["models"]
    out = {}
    for name, m in index.items():
        state = torch.load(MODELS / f"{name}.pt", map_location="cpu", weights_only=True)
        out[name] = TargetModel.from_state(name, m["arch"], m["classes"], m["resolution"], state, device=device,
                                           info=m.get("info"))
    return out
