"""The audit's manifest: every output today's pipeline declares, read from the generated dvc.yaml (a public format:
each stage's ``outs``, ``metrics`` and ``plots``), and what lies under the pipeline's artifact roots that no stage
declares.

Caveats first: dvc.yaml is generated from params.yaml (``weakspot pipeline``, every ``weakspot audit``), so the
manifest is what today's params produce. DVC leaves the outputs of a stage that is no longer in dvc.yaml (a target
or a method removed) in the workspace; every reader of the audit's files (the report, the history, the gates,
``junit.xml`` and ``summary.md``, ``weakspot compare``) reads only what the manifest declares, and regenerating
dvc.yaml removes the rest (:func:`stale`: ``ops.engine.audit.remove_stale``). A path is *declared* when it is a declared
output or lies inside one (a file in an output folder). A checkout without dvc.yaml has no pipeline and no manifest:
:func:`read_manifest` says so rather than let a reader take whatever is on disk.

    >>> m = Manifest.of({"train-a": ["plots/train/a", "metrics/train/a.json"]})
    >>> m.declares("plots/train/a/section.json"), m.declares("plots/train/b/section.json")
    (True, False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Mapping, Tuple

from tasks import paths
from weakspot.errors import DataError

#: The folders the pipeline's stages write to and nothing else does (:mod:`tasks.paths`): what no stage declares
#: under them is a stale output (``reports/`` is not one: the report stage's page and the verdict files are
#: rewritten by every audit).
ROOTS: Tuple[Path, ...] = (paths.TARGETS, paths.RENDER, paths.PLOTS, paths.METRICS, paths.FINDINGS)
#: The keys of a stage in dvc.yaml that name its outputs.
OUTPUT_KEYS = ("outs", "metrics", "plots")


def entry_paths(entries: Iterable) -> List[str]:
    """The paths of a stage's ``deps`` or ``outs`` list (an entry is a path or a one-key mapping path -> options)."""
    out = []
    for e in entries or []:
        out.append(next(iter(e)) if isinstance(e, dict) else str(e))
    return [p.rstrip("/") for p in out]


def _inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies inside it (POSIX paths relative to the root)."""
    return path == folder or path.startswith(folder + "/")


@dataclass(frozen=True)
class Manifest:
    """What dvc.yaml declares, its paths POSIX and relative to ``root`` (the repository, an absolute path): ``stages``
    maps each stage to its outputs (outs, metrics and plots, in dvc.yaml's order); ``deps`` is every path a stage
    reads. A path given to its methods is relative to ``root`` or absolute."""

    root: Path
    stages: Mapping[str, Tuple[str, ...]]
    deps: FrozenSet[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, stages: Mapping[str, Iterable[str]], deps: Iterable[str] = (), root: "str | Path" = ".") -> "Manifest":
        """A manifest of these stages' outputs (a test's, or one built in memory)."""
        outs = {s: tuple(p.rstrip("/") for p in paths_) for s, paths_ in stages.items()}
        return cls(Path(root).resolve(), outs, frozenset(d.rstrip("/") for d in deps))

    @property
    def outputs(self) -> Tuple[str, ...]:
        """Every declared output, once, in dvc.yaml's order."""
        return tuple(dict.fromkeys(o for outs in self.stages.values() for o in outs))

    def relative(self, path: "str | Path") -> str:
        """``path`` (relative to the root, or absolute inside it) as a POSIX path relative to the root; an absolute
        path outside the root is returned as it is (no output is there)."""
        p = Path(path)
        if p.is_absolute():
            try:
                p = p.relative_to(self.root)
            except ValueError:
                try:  # through a link above it (the file itself may be a link into DVC's cache: not followed)
                    p = p.parent.resolve().relative_to(self.root) / p.name
                except ValueError:
                    return p.as_posix()
        return p.as_posix()

    def declares(self, path: "str | Path") -> bool:
        """``path`` is a declared output or lies inside one."""
        rel = self.relative(path)
        return any(_inside(rel, o) for o in self.outputs)

    def files(self, folder: "str | Path", pattern: str = "**/*") -> List[Path]:
        """The existing files under ``root/folder`` that match ``pattern`` (``Path.glob``'s) and are declared, sorted
        (absolute paths: ``root / folder / ...``)."""
        base = self.root / folder
        if not base.is_dir():
            return []
        return sorted(f for f in base.glob(pattern) if f.is_file() and self.declares(f.relative_to(self.root)))

    def stale(self, roots: Iterable["str | Path"] = ROOTS) -> List[str]:
        """What lies under ``roots`` that no stage declares: the outputs of stages dvc.yaml no longer has, files
        nothing wrote, empty folders. Each is the largest such file or folder (a folder none of whose contents is
        declared is one entry); paths relative to the root, sorted. A folder that holds a declared output is looked
        into; one that holds a path a stage reads (a user's weights kept in another target's output folder) is kept
        whole, like what a stage reads."""
        outs, deps = self.outputs, tuple(self.deps)
        found: List[str] = []

        def visit(rel: str) -> None:
            if any(_inside(rel, o) for o in outs) or any(_inside(rel, d) for d in deps):
                return  # declared, or read by a stage
            if any(_inside(o, rel) for o in outs):  # holds a declared output: look inside
                p = self.root / rel
                if p.is_dir() and not p.is_symlink():
                    for child in sorted(p.iterdir()):
                        visit(f"{rel}/{child.name}")
                return
            if any(_inside(d, rel) for d in deps):
                return  # holds what a stage reads
            found.append(rel)

        for r in roots:
            rel = self.relative(r)
            if (self.root / rel).exists() or (self.root / rel).is_symlink():
                visit(rel)
        return sorted(found)


def read_manifest(root: "str | Path" = ".") -> Manifest:
    """The manifest of the pipeline in ``root`` (its dvc.yaml); a :class:`~weakspot.errors.DataError` when there is
    none (no pipeline: nothing is declared, and no reader should guess)."""
    import yaml

    f = Path(root) / "dvc.yaml"
    if not f.is_file():
        raise DataError(
            f"no dvc.yaml in {Path(root).resolve()}: the audit's outputs are what the generated pipeline declares; "
            "run `weakspot pipeline` (or `weakspot audit`) to generate it from params.yaml"
        )
    raw = yaml.safe_load(f.read_text()) or {}
    stages: Dict[str, Tuple[str, ...]] = {}
    deps: set = set()
    for name, s in (raw.get("stages") or {}).items():
        s = s or {}
        stages[name] = tuple(o for key in OUTPUT_KEYS for o in entry_paths(s.get(key)))
        deps.update(entry_paths(s.get("deps")))
    return Manifest(Path(root).resolve(), stages, frozenset(deps))
