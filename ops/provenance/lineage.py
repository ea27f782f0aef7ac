"""Lineage on demand: the chain of stages that produced an artifact or one number in it.

Caveats first: the chain is read from what the last successful ``dvc repro`` recorded -- ``dvc.lock`` (each stage's
command, the params values it read, the md5 of every input and output) -- and from the metadata each artifact
carries (a stage's ``section.json`` lineage: the git commit of the code, the sha256 of its inputs, when it ran and
its Prefect flow run). An artifact edited by hand after that run no longer matches ``dvc.lock``'s md5; ``dvc status``
says so, and this command marks such a file "changed since the run". Paths are relative to the repository root.

    weakspot lineage metrics/hda/digits.json hda.ae_prop     # one number: its value and the chain that made it
    weakspot lineage findings/scenes/examine.parquet          # an artifact
    weakspot lineage data/targets/digits/model --json         # machine-readable
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from tasks import paths
from tasks.closure import PROJECT_PACKAGES
from tasks.packages import PACKAGES_FILE
from weakspot.errors import DataError
from weakspot.hashing import file_digest


def _norm(p: str) -> str:
    return str(Path(p).as_posix()).rstrip("/")


def _outs(stage: Dict[str, Any]) -> List[str]:
    out = []
    for key in ("outs", "metrics", "plots"):
        for o in stage.get(key, []) or []:
            out.append(_norm(next(iter(o)) if isinstance(o, dict) else o))
    return out


def _producer(path: str, stages: Dict[str, Dict[str, Any]]) -> Optional[Tuple[str, str]]:
    """(stage name, the out that holds ``path``) of the stage whose outputs contain ``path``."""
    p = _norm(path)
    best = None
    for name, st in stages.items():
        for o in _outs(st):
            if p == o or p.startswith(o + "/"):
                if best is None or len(o) > len(best[1]):
                    best = (name, o)
    return best


def _metadata(stage: str, root: Path) -> Dict[str, Any]:
    """The lineage an artifact of ``stage`` carries (section.json, model.json or lineage.json), or {}."""
    name, _, target = stage.partition("-")
    cands = [root / "plots" / name / target / "section.json" if target else root / "plots" / name / "section.json"]
    if name == "train" and target:
        cands.insert(0, root / "data" / "targets" / target / "model" / "model.json")
    if name == "prepare" and target:
        cands.insert(0, root / "data" / "targets" / target / "prepared" / "lineage.json")
    for c in cands:
        if c.is_file():
            try:
                d = json.loads(c.read_text())
            except (OSError, ValueError):
                continue
            lin = d.get("lineage", d)
            if isinstance(lin, dict):
                return {**lin, "_file": str(c.relative_to(root))}
    return {}


def flatten(d: Any, prefix: str = "") -> Dict[str, Any]:
    """Nested dicts as ``{"a.b.c": leaf}`` (lists and scalars are leaves)."""
    if isinstance(d, dict):
        out: Dict[str, Any] = {}
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def _md5(path: Path) -> Optional[str]:
    return file_digest(path, "md5") if path.is_file() else None


def lookup(path: Path, key: str) -> Any:
    """The value at dotted ``key`` in the JSON file ``path`` (``hda.ae_prop``; list items by index)."""
    try:
        d: Any = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: cannot read it as JSON to find {key!r} ({e})") from None
    for part in key.split("."):
        if isinstance(d, dict) and part in d:
            d = d[part]
        elif isinstance(d, list) and part.lstrip("-").isdigit() and -len(d) <= int(part) < len(d):
            d = d[int(part)]
        else:
            keys = ", ".join(map(str, d)) if isinstance(d, dict) else f"a {type(d).__name__}"
            raise DataError(f"{path}: no {part!r} in {key!r} (there: {keys})")
    return d


def _value(root: Path, p: str, key: str) -> Any:
    """The number at ``key`` in ``p``; for a stage's metrics file (its headline), a detail is looked up in the
    results file beside its report section (``plots/<stage>/<target>/results.json``, made by the same stage)."""
    details = root / paths.results_for(p) if p.startswith(f"{paths.METRICS}/") else None
    try:
        return lookup(root / p, key)
    except DataError:
        if details is None or not details.is_file():
            raise
        return lookup(details, key)


def trace(path: str, key: Optional[str] = None, root: "str | Path" = ".") -> Dict[str, Any]:
    """The lineage of ``path`` (and of the number at ``key`` in it): ``{"artifact", "key", "value", "chain"}``, the
    chain listing the producing stage first, then the stages that made its inputs, each once."""
    root = Path(root)
    try:
        dvc_yaml = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as e:
        raise DataError(f"{root / 'dvc.yaml'}: cannot read the pipeline ({e}); run `weakspot pipeline`") from None
    lock_file = root / "dvc.lock"
    lock = (yaml.safe_load(lock_file.read_text()) or {}).get("stages", {}) if lock_file.is_file() else {}
    p = _norm(path)
    if not (root / p).exists():
        raise DataError(
            f"{p}: not found; run the audit first (weakspot audit), or name a file under metrics/, "
            "plots/, findings/ or data/"
        )
    first = _producer(p, dvc_yaml)
    if first is None:
        raise DataError(
            f"{p}: no stage of dvc.yaml produces it (outputs are under metrics/, plots/, findings/, "
            "data/targets/, data/render/ and reports/)"
        )
    value = _value(root, p, key) if key else None
    chain, seen, todo = [], set(), [first[0]]
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        st, lk = dvc_yaml.get(name, {}), lock.get(name)
        meta = _metadata(name, root)
        deps = []
        for d in (lk or {}).get("deps", []) if lk else [{"path": _norm(x)} for x in st.get("deps", [])]:
            dp = _norm(d["path"])
            prod = _producer(dp, dvc_yaml)
            by = prod[0] if prod and prod[0] != name else None
            deps.append({"path": dp, "md5": d.get("md5"), "made_by": by})
            if by:
                todo.append(by)
        outs = [{"path": _norm(o["path"]), "md5": o.get("md5")} for o in (lk or {}).get("outs", [])]
        entry = {
            "stage": name,
            "cmd": st.get("cmd"),
            "recorded": lk is not None,
            "params": flatten((lk or {}).get("params", {}).get("params.yaml", {})),
            # the versions of the installed distributions it computes with (tasks/packages.py), as dvc.lock recorded
            "packages": dict((lk or {}).get("params", {}).get(str(PACKAGES_FILE), {})),
            "identity_sha256": (meta.get("identity") or {}).get("sha256"),
            "deps": deps,
            "outs": outs,
            "code": meta.get("code"),
            "ran_at": meta.get("ran_at"),
            "prefect_flow_run": meta.get("prefect_flow_run"),
            "worker": meta.get("worker"),
            "metadata_file": meta.get("_file"),
            "input_sha256": meta.get("inputs", {}),
        }
        if name == first[0] and lk:  # has the artifact changed since the run that dvc.lock recorded?
            for o in lk.get("outs", []):
                op = _norm(o["path"])
                if op == p and "md5" in o and not str(o["md5"]).endswith(".dir"):
                    entry["changed_since_run"] = _md5(root / p) != o["md5"]
        chain.append(entry)
    return {"artifact": p, "key": key, "value": value, "chain": chain}


def _is_code(path: str) -> bool:
    """A module, or a folder of modules (a package), as opposed to data, weights or the history."""
    p = Path(path)
    return p.suffix == ".py" or (p.is_dir() and any(p.rglob("*.py")))


def format_trace(t: Dict[str, Any], *, all_deps: bool = False) -> str:
    """A person's reading of :func:`trace`."""
    lines = []
    head = t["artifact"] + (f"  {t['key']} = {json.dumps(t['value'])}" if t["key"] else "")
    lines.append(head)
    for i, e in enumerate(t["chain"]):
        pre = "made by" if i == 0 else "<- its input came from"
        lines.append(f"{pre} stage {e['stage']}  ({e['cmd']})")
        if not e["recorded"]:
            lines.append("    not in dvc.lock: this stage has not run through `weakspot audit` here")
        if e.get("changed_since_run"):
            lines.append("    WARNING: the file changed since the run dvc.lock recorded (dvc status shows it)")
        when = e.get("ran_at") or "unknown (made before lineage recorded the time)"
        run = e.get("prefect_flow_run") or {}
        lines.append(
            f"    ran at {when}"
            + (f"; Prefect flow run {run.get('name')!r} (id {run.get('id')})" if run.get("id") else "")
        )
        w = e.get("worker") or {}
        if w:
            lines.append(f"    on the {w.get('pool')} pool, host {w.get('host')} (stage flow run {w.get('flow_run')})")
        c = e.get("code") or {}
        if c:
            lines.append(
                f"    code: git {str(c.get('git_commit'))[:12]}{' (uncommitted changes)' if c.get('git_dirty') else ''}"
                f", weakspot {c.get('weakspot')}, torch {c.get('torch', '-')}, python {c.get('python')}"
            )
        if e["params"]:
            lines.append("    params read: " + "; ".join(f"{k} = {json.dumps(v)}" for k, v in e["params"].items()))
        if e.get("packages"):
            lines.append(
                f"    packages ({len(e['packages'])}): " + ", ".join(f"{k} {v}" for k, v in e["packages"].items())
            )
        if e.get("identity_sha256"):
            lines.append(f"    stage identity sha256 {e['identity_sha256']} (the key of its cached calls)")
        data = [d for d in e["deps"] if d["made_by"] or d["path"].startswith("data/")]
        code = [d for d in e["deps"] if d not in data]
        # the user's own modules (a model factory, a plug-in's files) are always listed
        own = [d for d in code if d["path"].split("/")[0] not in PROJECT_PACKAGES and _is_code(d["path"])]
        lines += [f"    your code {d['path']}  md5 {d['md5'] or '?'}" for d in own]
        code = [d for d in code if d not in own]
        for d in data:
            by = f"  (made by {d['made_by']})" if d["made_by"] else ""
            lines.append(f"    input {d['path']}  md5 {d['md5'] or '?'}{by}")
        if code:
            if all_deps:
                lines += [f"    code {d['path']}  md5 {d['md5'] or '?'}" for d in code]
            else:
                lines.append(f"    code: {len(code)} files, md5 each in dvc.lock (--all lists them)")
        if e.get("metadata_file"):
            lines.append(f"    metadata: {e['metadata_file']}")
    return "\n".join(lines)
