"""The workspace as it is, kept as a commit on a private ref, so that workers audit exactly what the user has (the
usual case: params.yaml just edited, not committed), as ``dvc exp`` keeps its experiments.

Caveats first: the commit holds the tracked and new files git does not ignore (the pipeline's outputs are ignored:
DVC restores them), with the current HEAD as its parent; the user's branch, index and files are untouched. The
ref is ``refs/weakspot/audits/<stamp>``; a clone reaches it with ``git fetch <repo> <ref>``.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Tuple

from weakspot.errors import ConfigError

PREFIX = "refs/weakspot/audits/"


def _git(args, root, env=None) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise ConfigError(f"git {' '.join(args)} failed in {root}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def snapshot(root: "str | Path" = ".") -> Tuple[str, str]:
    """Commit the workspace at ``root`` as it is to a private ref: (ref, commit sha). A checkout that is not a git
    repository is a ConfigError (workers clone the audit from git)."""
    root = Path(root).resolve()
    if not (root / ".git").exists():
        raise ConfigError(f"{root} is not a git repository: workers check out the audit from git (git init, commit)")
    head = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="weakspot-index-") as tmp:
        env: Dict[str, str] = {
            **os.environ,
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_AUTHOR_NAME": "weakspot",
            "GIT_AUTHOR_EMAIL": "weakspot@localhost",
            "GIT_COMMITTER_NAME": "weakspot",
            "GIT_COMMITTER_EMAIL": "weakspot@localhost",
        }
        if head:
            _git(["read-tree", head], root, env)
        _git(["add", "-A", "."], root, env)
        tree = _git(["write-tree"], root, env)
        if head and tree == _git(["rev-parse", f"{head}^{{tree}}"], root):
            sha = head  # nothing uncommitted: the audit's commit is HEAD itself
        else:
            sha = _git(
                [
                    "commit-tree",
                    tree,
                    *(["-p", head] if head else []),
                    "-m",
                    "weakspot audit: the workspace as audited",
                ],
                root,
                env,
            )
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    ref = PREFIX + stamp
    _git(["update-ref", ref, sha], root)
    return ref, sha
