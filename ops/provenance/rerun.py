"""``weakspot rerun <audit id>``: reproduce a past audit exactly, in a scratch git worktree.

The history store keeps, for every audit, the git revision of the code, the params.yaml that ran and its dvc.lock
(every input, param and output hash). A rerun checks out that revision in a scratch worktree (``git worktree add
--detach``), puts the audit's params.yaml there, runs ``weakspot audit`` in it with the worktree's own code, and
compares what it made with the lock: every metrics file must be byte-identical (its md5 in the lock), and the other
single-file outputs are listed as identical or not. The worktree has its own empty DVC cache, so every stage is
recomputed; ``--pull`` restores stages from the DVC remote's run-cache instead (what `weakspot audit --push`, the
nightly flow, sends there), which is how another machine gets the audit without recomputing it.

Caveats: an audit that ran with uncommitted code changes (``git_dirty``) cannot be reproduced from its revision
alone; the rerun says so and goes on with the committed code. The data files the audit read must be the ones in
git at that revision (the lock's md5s check that: a changed input shows as a changed output).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from weakspot.errors import ConfigError, DataError
from weakspot.hashing import file_digest

from ops.engine.dvc import configure_remote
from ops.verdict.history import find_audit


def _md5(path: Path) -> str:
    return file_digest(path, "md5")


def lock_outputs(lock_file: "str | Path") -> Dict[str, Dict[str, Any]]:
    """``{path: {"stage", "md5", "metric": bool, "dir": bool}}`` of every output in a dvc.lock."""
    lock = yaml.safe_load(Path(lock_file).read_text()) or {}
    out: Dict[str, Dict[str, Any]] = {}
    for stage, body in (lock.get("stages") or {}).items():
        for o in body.get("outs") or []:
            md5 = str(o.get("md5", ""))
            out[o["path"]] = {
                "stage": stage,
                "md5": md5,
                "dir": md5.endswith(".dir"),
                "metric": o["path"].startswith("metrics/"),
            }
    return out


def package_drift(lock_file: "str | Path") -> List[str]:
    """``"name recorded -> installed"`` for each distribution a stage of the lock computed with (its ``packages.yaml``
    params) at another version than this environment has."""
    from tasks.packages import PACKAGES_FILE, entry

    lock = yaml.safe_load(Path(lock_file).read_text()) or {}
    recorded: Dict[str, str] = {}
    for body in (lock.get("stages") or {}).values():
        recorded.update(
            {str(k): str(v) for k, v in ((body or {}).get("params") or {}).get(str(PACKAGES_FILE), {}).items()}
        )
    here = {n: entry(n) for n in recorded}
    return [f"{n} {v} -> {here[n]}" for n, v in sorted(recorded.items()) if here[n] != v]


def compare_outputs(lock_file: "str | Path", root: "str | Path") -> List[Dict[str, Any]]:
    """Each single-file output of the lock's stages that ``root/dvc.yaml`` has, against the file under ``root``:
    identical, differs or missing. Folders are listed as not compared (their lock hash is DVC's listing; their
    section.json files carry run times, by design)."""
    rows = []
    dvc_yaml = Path(root) / "dvc.yaml"
    # a lock keeps entries of stages that no longer exist (a target removed from params): only the audit's own
    stages = set((yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {})) if dvc_yaml.is_file() else None
    for path, o in sorted(lock_outputs(lock_file).items()):
        if stages is not None and o["stage"] not in stages:
            continue
        f = Path(root) / path
        if o["dir"]:
            status = "folder (not compared)"
        elif not f.is_file():
            status = "missing"
        else:
            status = "identical" if _md5(f) == o["md5"] else "differs"
        rows.append({"path": path, "stage": o["stage"], "metric": o["metric"], "status": status})
    return rows


def _git(*args: str, cwd: "str | Path") -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise DataError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def cli_module(checkout: "str | Path") -> str:
    """The module of the ``weakspot`` command in ``checkout``: ``ops.cli``, or ``weakspot.cli`` in a revision from
    before the operations left the library (an audit recorded then is rerun with its own code)."""
    return "ops.cli" if (Path(checkout) / "ops" / "cli.py").is_file() else "weakspot.cli"


def rerun(
    audit_id: str,
    root: "str | Path" = ".",
    *,
    store: str = "history",
    workdir: Optional[str] = None,
    pull: bool = False,
    remote: Optional[str] = None,
    keep: bool = False,
    say=print,
) -> Dict[str, Any]:
    """Reproduce the recorded audit ``audit_id`` (see the module's doc; ``remote``: the DVC remote for ``pull``,
    :func:`ops.engine.dvc.remote_url`); returns ``{"audit", "worktree", "rows", "metrics_identical", "rc", "reproduced"}``.
    The worktree is removed afterwards unless ``keep`` or the metrics differ."""
    if pull and not remote:
        raise ConfigError("a rerun with --pull needs the DVC remote's address (cli: history.remote)")
    root = Path(root).resolve()
    a = find_audit(root, store, audit_id)
    for key in ("params", "lock"):
        if not Path(a[key]).is_file():
            raise DataError(
                f"audit {a['audit_id']}: {a[key]} not found; audits recorded before reruns were "
                "possible keep no params or lock, so they cannot be rerun"
            )
    rev = a.get("git_rev") or ""
    if not rev:
        raise DataError(f"audit {a['audit_id']} ran outside git (no revision recorded): nothing to check out")
    if a["git_dirty"]:
        say(
            f"weakspot rerun: WARNING: audit {a['audit_id']} ran with uncommitted code changes; the rerun uses "
            f"commit {rev[:12]} as committed, so its results may differ"
        )
    drift = package_drift(a["lock"])
    if drift:
        say(
            f"weakspot rerun: WARNING: audit {a['audit_id']} computed with other package versions than this "
            f"environment has ({', '.join(drift[:5])}{' ...' if len(drift) > 5 else ''}): the stages that use them "
            "are recomputed with this environment's, so their results may differ (install its requirements.lock)"
        )
    _git("cat-file", "-e", f"{rev}^{{commit}}", cwd=root)
    wt = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"weakspot-rerun-{a['audit_id'][:24]}-"))
    if wt.exists() and any(wt.iterdir()):
        raise ConfigError(f"{wt}: not empty; give --workdir an empty or new folder")
    wt.rmdir() if wt.exists() else None
    say(f"weakspot rerun: audit {a['audit_id']} (commit {rev[:12]}, {a.get('time', '?')}) in {wt}")
    _git("worktree", "add", "--detach", str(wt), rev, cwd=root)
    ok = False
    try:
        shutil.copyfile(a["params"], wt / "params.yaml")
        # from no lock: a committed dvc.lock would make DVC trust its (other) hashes instead of running or restoring
        (wt / "dvc.lock").unlink(missing_ok=True)
        env = {**os.environ, "PYTHONPATH": str(wt) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        env.pop("PREFECT_API_URL", None)  # the rerun's own server, so its runs do not mix with the nightly ones
        env.pop("WEAKSPOT_PARAMS", None)
        env["WEAKSPOT_ROOT"] = str(wt)
        argv = [sys.executable, "-m", cli_module(wt), "audit"]
        if pull:
            url = configure_remote(remote, wt)
            argv.append("--pull")
            say(f"weakspot rerun: restoring stages from the DVC remote {url} where its run-cache has them")
        say("weakspot rerun: " + " ".join(["weakspot", *argv[3:]]) + f" (in {wt})")
        rc = subprocess.call(argv, cwd=wt, env=env)
        rows = compare_outputs(a["lock"], wt)
        metrics = [r for r in rows if r["metric"]]
        identical = bool(metrics) and all(r["status"] == "identical" for r in metrics)
        ok = identical and rc in (0, 3)
        return {
            "audit": a,
            "worktree": str(wt),
            "rows": rows,
            "metrics_identical": identical,
            "rc": rc,
            "reproduced": ok,
        }
    finally:
        if ok and not keep:
            subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=root, capture_output=True)
            shutil.rmtree(wt, ignore_errors=True)
        else:
            say(
                f"weakspot rerun: the worktree is kept for inspection: {wt} "
                f"(remove it with `git worktree remove --force {wt}`)"
            )


def format_rerun(res: Dict[str, Any]) -> str:
    rows = res["rows"]
    metrics = [r for r in rows if r["metric"]]
    others = [r for r in rows if not r["metric"] and r["status"] != "folder (not compared)"]
    same = sum(r["status"] == "identical" for r in metrics)
    lines = [
        f"Rerun of audit {res['audit']['audit_id']}: {same} of {len(metrics)} metrics files byte-identical"
        + ("" if res["rc"] == 0 else f" (the rerun's audit exited {res['rc']})")
    ]
    for r in metrics:
        if r["status"] != "identical":
            lines.append(f"  {r['status'].upper()}: {r['path']} ({r['stage']})")
    if others:
        lines.append(
            f"  other single-file outputs: {sum(r['status'] == 'identical' for r in others)} of "
            f"{len(others)} identical"
            + "".join(f"\n    {r['status']}: {r['path']}" for r in others if r["status"] != "identical")
        )
    lines.append("  verdict: " + ("REPRODUCED" if res["reproduced"] else "NOT REPRODUCED"))
    return "\n".join(lines)
