"""DVC as the audit drives it: the executable, the environment of the pipeline's subprocesses, ``dvc repro``, the
stages of dvc.yaml, the DVC remote and ``dvc push``.

Caveats first: every function works on the checkout in the current folder (the repository root, DVC's working
directory), except where it takes a ``root``. The remote is configured in ``.dvc/config.local`` (not committed), so a
clone has none until ``weakspot audit --push`` or ``weakspot rerun --pull`` sets it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import yaml

PARAMS = "params.yaml"


def env() -> Dict[str, str]:
    """The environment for pipeline subprocesses: this interpreter's bin first, so dvc.yaml's `python` is ours."""
    out = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    out["PATH"] = bindir + os.pathsep + out.get("PATH", "")
    return out


def dvc() -> List[str]:
    """The command that runs DVC: the one beside this interpreter, else on PATH, else ``python -m dvc``."""
    exe = Path(sys.executable).parent / "dvc"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("dvc")
    if found:
        return [found]
    return [sys.executable, "-m", "dvc"]


def checkout_on_path(root: "str | Path" = ".") -> None:
    """Put the checkout at ``root`` first on ``sys.path``, so that its own ``tasks`` package is the one dvc.yaml is
    generated from (:mod:`tasks.closure` lists the files beside it), even when the ``weakspot`` command is another
    checkout's install. Call it before anything imports ``tasks``."""
    path = str(Path(root).resolve())
    if path not in sys.path:
        sys.path.insert(0, path)


def stage_names(dvc_yaml: "str | Path" = "dvc.yaml") -> List[str]:
    """The stages of dvc.yaml, in its order."""
    return list((yaml.safe_load(Path(dvc_yaml).read_text()) or {}).get("stages", {}))


def repro(argv: List[str], environ: Dict[str, str]) -> int:
    """Plain ``dvc repro ARGV`` in the current folder; its exit code (a failure says which artifacts are intact)."""
    print("weakspot: dvc repro " + " ".join(argv), flush=True)
    rc = subprocess.call(dvc() + ["repro"] + argv, env=environ)
    if rc != 0:
        print(
            f"weakspot: the pipeline failed (exit {rc}); the message above names the stage and the problem. "
            "Artifacts of earlier successful stages are intact.",
            file=sys.stderr,
        )
    return rc


def remote_url(hp: Any) -> str:
    """The DVC remote of ``history.remote`` (``hp``: the history section) or WEAKSPOT_DVC_REMOTE: a local folder is
    made absolute."""
    url = os.environ.get("WEAKSPOT_DVC_REMOTE") or hp.remote
    if "://" not in url:
        url = str(Path(url).expanduser().resolve())
    return url


def configure_remote(url: str, root: "str | Path" = ".") -> str:
    """Make ``url`` (see :func:`remote_url`) the default DVC remote, ``weakspot``, of the checkout at ``root`` (in
    .dvc/config.local: not committed)."""
    if "://" not in url:
        Path(url).mkdir(parents=True, exist_ok=True)
    local = Path(root) / ".dvc" / "config.local"
    plain = f"[core]\n    remote = weakspot\n['remote \"weakspot\"']\n    url = {url}\n"
    if _plain(url) and local.is_file() and local.read_text() == plain:
        return url  # already so (an audit with --pull sets it before its workers' run does): DVC is not started
    # DVC's own CLI writes its config (issue 48: no hand edit of either tool's files), about 1.5 s on a fresh clone
    subprocess.run(
        dvc() + ["remote", "add", "--local", "--force", "-d", "weakspot", url],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return url


def _plain(url: str) -> bool:
    """A URL DVC's config file holds as it is (no quoting): a remote URL or an absolute path of plain characters."""
    return ("://" in url or os.path.isabs(url)) and re.fullmatch(r"[A-Za-z0-9_./:@%+=~,-]+", url) is not None


def push(hp: Any) -> int:
    """`dvc push --run-cache` of every output to the remote: another machine's `weakspot audit --pull` (or
    `weakspot rerun --pull`) then restores each stage from it instead of recomputing."""
    url = configure_remote(remote_url(hp))
    print(f"weakspot: pushing the audit's artifacts and run-cache to {url}", flush=True)
    rc = subprocess.call(dvc() + ["push", "--run-cache", "-r", "weakspot"], env=env())
    if rc != 0:
        print(f"weakspot: dvc push to {url} failed (exit {rc}); the audit itself succeeded", file=sys.stderr)
    return rc


def cache_dir(root: "str | Path" = ".") -> str:
    """The DVC cache folder of the checkout at ``root``, as ``dvc cache dir`` names it (absolute)."""
    out = subprocess.run(dvc() + ["cache", "dir"], cwd=root, capture_output=True, text=True, check=True).stdout
    path = Path(out.strip().splitlines()[-1])
    return str(path if path.is_absolute() else (Path(root) / path).resolve())


def use_cache(cache: str, root: "str | Path") -> None:
    """Make ``cache`` the DVC cache of the clone at ``root`` (``dvc cache dir --local``: not committed), once per
    clone: a marker beside the clone (``<clone>.cache``) says which cache it was given."""
    marker = Path(str(Path(root).resolve()) + ".cache")
    if marker.is_file() and marker.read_text() == cache:
        return
    subprocess.run(dvc() + ["cache", "dir", "--local", cache], cwd=root, check=True, capture_output=True, text=True)
    marker.write_text(cache)
