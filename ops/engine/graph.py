"""The stage graph of dvc.yaml, read from the file (a public format): which stages each stage needs.

Caveats first: a stage needs another when one of its deps is one of the other's outs, or lies inside one (a file in
an output folder) or holds one (a folder around an output). Deps that no stage makes (code, shipped data, params)
add no edge. The graph is what ``dvc dag`` draws; the audit's flow (:mod:`ops.engine.audit_flow`) runs a stage
once every stage it needs has finished.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, List, Set

import yaml

from tasks.manifest import entry_paths

__all__ = ["downstream", "entry_paths", "stage_graph", "upstream"]


def _inside(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def stage_graph(dvc_yaml: "str | Path" = "dvc.yaml") -> Dict[str, List[str]]:
    """Stage -> the stages it needs directly, in dvc.yaml's order."""
    stages = (yaml.safe_load(Path(dvc_yaml).read_text()) or {}).get("stages", {})
    outs = {
        name: [o for key in ("outs", "metrics", "plots") for o in entry_paths(s.get(key, []))]
        for name, s in stages.items()
    }
    graph: Dict[str, List[str]] = {}
    for name, s in stages.items():
        deps = entry_paths(s.get("deps", []))
        graph[name] = [
            other for other in stages if other != name and any(_inside(d, o) for d in deps for o in outs[other])
        ]
    return graph


def upstream(graph: Dict[str, List[str]], stages: Iterable[str]) -> List[str]:
    """``stages`` and every stage they need, transitively, in the graph's order."""
    seen: Set[str] = set()
    todo = list(stages)
    while todo:
        s = todo.pop()
        if s not in seen:
            seen.add(s)
            todo.extend(graph.get(s, []))
    return [s for s in graph if s in seen]


def downstream(graph: Dict[str, List[str]], stage: str) -> List[str]:
    """Every stage that needs ``stage``, transitively, in the graph's order."""
    hit: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for s, needs in graph.items():
            if s not in hit and any(n == stage or n in hit for n in needs):
                hit.add(s)
                changed = True
    return [s for s in graph if s in hit]
