"""How long each stage of an audit will take on this machine, before it runs: ``weakspot audit --estimate`` and the
audit's first lines.

A stage's estimate is ``OVERHEAD + fixed[step] + per_work[step] x work``. Its *work* is what the method runs, counted from
params.yaml (images, iterations, epochs, seeds, renders; each method's ``depth``) and priced in seconds on this
machine by short probes: one image through the target's own model (forward, and forward + backward) and through a
small convolutional network standing for the methods' own networks (a VAE, an autoencoder, a reference CNN), each
timed at ``threads`` threads as the stages run. So a larger image, a slower model, more epochs or a deeper depth
cost more, and a faster machine less. The coefficients (:data:`COSTS`, ``costs.json`` beside this file: a step's
fixed seconds, its loading, figures and report, and its seconds per unit of work) absorb what the count leaves out;
``benchmarks/bench_estimate.py`` fits them to the stage times recorded by past audits
(``history/<audit>.stages.json``) and checks the fit. A step on a table and on images are fitted apart
(``train:table``, ``train``).

Caveats first: the work counts are approximations of each method's dominant loops (stated per step below), not a
profile; rendering is priced by pixels x samples with a coefficient fitted here (no Blender probe: importing it
takes seconds). The stage times of the last audit are shown beside the estimate, and with the same work they are the
better guess: the line says so.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

#: seconds every stage costs besides its work: the worker's flow run, git and DVC in its clone, Python's imports
OVERHEAD = 8.0
COSTS_FILE = Path(__file__).with_name("costs.json")


def _load_costs() -> Dict[str, Tuple[float, float]]:
    try:
        raw = json.loads(COSTS_FILE.read_text())["coefficients"]
        return {k: (float(v["fixed"]), float(v["per_work"])) for k, v in raw.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


#: cost key (a step, ``:table`` for a table's) -> (fixed seconds, seconds per unit of work), fitted by
#: benchmarks/bench_estimate.py; (0, 1) where none was fitted
COSTS: Dict[str, Tuple[float, float]] = _load_costs()


def seconds_of(key: str, work: float) -> float:
    """A stage's estimate from its cost key and work."""
    fixed, per = COSTS.get(key, (0.0, 1.0))
    return OVERHEAD + fixed + per * work


@dataclass
class Probe:
    """A target's sizes and this machine's price of one image through its model and through a small CNN."""

    n_train: int
    n_eval: int
    shape: Sequence[int]  # (C, H, W) of an image, () of a table row
    n_classes: int
    fwd: float = 0.0  # seconds per image through the target's model, forward only (batched)
    grad: float = 0.0  # forward + backward to the input, per image
    own: float = 0.0  # a small CNN's forward + backward + optimiser step per image (the methods' own networks)
    ssim: float = 0.0  # HDA's perceptual term (SSIM) of one image against its seed
    white: bool = False

    @property
    def image(self) -> bool:
        return len(self.shape) == 3

    @property
    def pixels(self) -> int:
        return int(math.prod(self.shape)) if self.shape else 0


@dataclass
class StageWork:
    """One stage's work: its step, target, units of work (seconds on the probes), what they count, and the key of its
    coefficients (the step; ``<step>:table`` on a table)."""

    stage: str
    step: str
    target: Optional[str]
    work: float
    counted: str
    key: str = ""
    last: Optional[float] = None  # the last audit's measured seconds for this stage, where recorded
    same_work: bool = False  # whether the last audit's work was the same (then its time is the better guess)

    @property
    def seconds(self) -> float:
        return seconds_of(self.key or self.step, self.work)


# ---------------------------------------------------------------------------------------------------- the probes
def _time_per_item(fn: Callable[[], Any], items: int, budget: float = 0.3) -> float:
    """The fastest of repeated calls of ``fn`` (for ``budget`` seconds, 3 to 50 calls), per item: the minimum, as
    timeit takes it, since whatever else runs (the audit's Prefect server starting its services) only slows a call."""
    fn()  # warm-up (allocations, lazy initialisation)
    best, n, t0 = float("inf"), 0, time.perf_counter()
    while n < 3 or (time.perf_counter() - t0 < budget and n < 50):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        n += 1
    return best / items


def _small_cnn(shape: Sequence[int]) -> Any:
    import torch

    c, h, w = (int(s) for s in shape)
    return torch.nn.Sequential(
        torch.nn.Conv2d(c, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1, stride=2),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(32 * ((h + 1) // 2) * ((w + 1) // 2), 10),
    )


def probe_images(module: Any, shape: Sequence[int], threads: int, batch: int = 64) -> Dict[str, float]:
    """Seconds per image through ``module`` (forward; forward + backward to the input) and through a small CNN
    (forward, backward, an Adam step), at ``threads`` torch threads."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(threads)))
    try:
        x = torch.rand((batch, *[int(s) for s in shape]))
        out: Dict[str, float] = {}
        if module is not None:
            module = module.eval()

            def fwd() -> None:
                with torch.no_grad():
                    module(x)

            def grad() -> None:
                xg = x.clone().requires_grad_(True)
                module(xg).sum().backward()

            out["fwd"], out["grad"] = _time_per_item(fwd, batch), _time_per_item(grad, batch)
        net = _small_cnn(shape)
        opt = torch.optim.Adam(net.parameters(), 1e-3)

        def own() -> None:
            opt.zero_grad()
            net(x).sum().backward()
            opt.step()

        out["own"] = _time_per_item(own, batch)
        from weakspot.hda.generate import perceptual

        y = x.clamp(0, 1)
        out["ssim"] = _time_per_item(lambda: perceptual(y, y.flip(0), "ssim", 0.1, 1.0), batch)
        return out
    finally:
        torch.set_num_threads(before)


def _sizes(t: Any, data: Mapping[str, Any]) -> "tuple[int, int, List[int], int]":
    """(training rows, evaluation rows, an input's shape, classes) of target ``t`` without preparing it."""
    from weakspot.config import validate_section
    from weakspot.data.sources import load_source

    d = t.data
    if d.source == "scenes":
        s = validate_section("scene", dict(data))
        k = len(s.classes)
        return (
            k * s.train_instances * s.views_per_instance,
            k * s.val_instances * s.views_per_instance,
            [3, s.resolution, s.resolution],
            k,
        )
    parts = d.named_parts
    if parts:
        loaded = {
            name: load_source(spec, label=d.label, root=d.root, size=d.image_size) for name, spec in parts.items()
        }
        n_train = len(loaded["train"].y) if "train" in loaded else 0
        n_eval = sum(len(ds.y) for name, ds in loaded.items() if name != "train")
        first = next(iter(loaded.values()))
    else:
        first = load_source(d.source, label=d.label, root=d.root, size=d.image_size)
        n = len(first.y)
        n_train, n_eval = int(round(n * d.fractions[0])), n - int(round(n * d.fractions[0]))
    X = first.X
    shape = list(X.shape[1:]) if getattr(X, "ndim", 2) == 4 else []
    classes = len(getattr(first, "classes", None) or []) or int(len(set(map(str, first.y))))
    return n_train, n_eval, shape, classes


def probe_target(t: Any, data: Mapping[str, Any], threads: int) -> Probe:
    """Target ``t``'s sizes and, for an image target with a torch model, this machine's prices (the model is built,
    untrained: its architecture sets the price)."""
    n_train, n_eval, shape, k = _sizes(t, data)
    p = Probe(n_train, n_eval, shape, k, white=bool(t.white_box))
    if len(shape) != 3:
        return p
    module = None
    if t.white_box:
        try:
            module = _build(t, shape, k)
        except Exception:  # noqa: BLE001 - a model that cannot be built here is priced as the small CNN
            module = None
    prices = probe_images(module, shape, threads)
    p.own, p.ssim = prices["own"], prices["ssim"]
    p.fwd = prices.get("fwd", p.own / 3)
    p.grad = prices.get("grad", p.own)
    return p


def _build(t: Any, shape: Sequence[int], k: int) -> Any:
    m = t.model
    if m.kind == "builtin":
        from weakspot.models.archs import ARCHS

        return ARCHS.get(m.arch)(list(shape), k)
    from weakspot.models.spec import call_factory, resolve_factory

    if m.kind == "torch":
        return call_factory(resolve_factory(m.factory), m.factory, n_classes=k, input_shape=list(shape))
    if m.kind == "torchscript":
        import torch

        return torch.jit.load(str(m.weights), map_location="cpu")
    return None


# ------------------------------------------------------------------------------------------------ work per step
def _steps_of(epochs: int, n: int, batch: int, cap: Optional[int] = None) -> int:
    steps = int(epochs) * max(1, math.ceil(max(1, n) / max(1, batch)))
    return min(steps, int(cap)) if cap else steps


def work_train(p: Probe, t: Any, s: Any) -> "tuple[float, str]":
    """Training epochs x images (a built-in model), or the evaluation of every image (a user's trained model: the
    ``train:eval`` key); a table's SVM grid by fits x rows squared."""
    tr = t.train
    if not p.image:
        opts = tr.options or {}
        fits = len(opts.get("C", [1])) * len(opts.get("kernels", [1])) * max(2, int(opts.get("cv", 3)))
        return fits * (p.n_train / 1000.0) ** 2, f"{fits} SVM fits on {p.n_train} rows"
    if not t.trains:
        return (p.n_train + p.n_eval) * p.fwd, f"{p.n_train + p.n_eval} images evaluated"
    w = tr.epochs * p.n_train * p.grad * 1.5 + p.n_eval * p.fwd
    return w, f"{tr.epochs} epochs x {p.n_train} images"


def work_segments(p: Probe, t: Any, s: Any) -> "tuple[float, str]":
    return 1.0 + p.n_eval / 1000.0, f"{p.n_eval} evaluation rows"


def work_robustness(p: Probe, t: Any, s: Any) -> "tuple[float, str]":
    from weakspot.robustness.config import grid as eps_grid

    n = min(int(s.n_inputs), p.n_eval)
    grid = len(eps_grid(s, p.shape[0]))
    steps = s.pgd_steps + (200 if s.runs_autoattack else 0)
    return n * grid * steps * p.grad, f"{n} inputs x {grid} eps x {steps} steps"


def work_intrinsic(p: Probe, t: Any, s: Any) -> "tuple[float, str]":
    study = s.comparisons
    n_psi = min(int(s.n_inputs), p.n_eval)
    pool = max(n_psi, min(int(s.stability.pool), p.n_eval)) if study else n_psi
    n_att = min(int(s.n_attack), n_psi)
    steps = 1 + s.pgd_steps * 2 + s.cw_steps + (4 * s.autoattack.iters if s.autoattack.enabled else 0)
    psi = pool * s.psi.steps * s.psi.restarts * 2
    w = (psi + n_att * steps) * p.grad
    what = f"psi on {pool} inputs, {n_att} attacked x {steps} gradients"
    if study and s.defences:
        epochs = s.defence_epochs if s.defence_init == "target" else t.train.epochs
        per = {"fgsm_at": 2, "minmax": 1 + s.defence_options.get("minmax", {}).get("steps", 3), "gradreg": 3}
        train = sum(per.get(d, 2) for d in s.defences) * epochs * p.n_train * p.grad * 1.5
        w += train + len(s.defences) * n_att * steps * p.grad
        what += f"; {len(s.defences)} defended copies"
    return w, what


def work_corner(p: Probe, t: Any, s: Any) -> "tuple[float, str]":
    n = min(p.n_train, int(s.train_sample or p.n_train))
    ae = _steps_of(s.epochs, n, s.batch_size, s.max_ae_steps) * s.batch_size * p.own * 2
    judge = min(int(s.reference_max_steps), _steps_of(s.reference_epochs, min(n, s.reference_train), 64)) * 64 * p.own
    search = s.n_seeds * s.steps * (p.grad + p.own)
    return ae + judge + search, f"autoencoder, judge, {s.n_seeds} seeds x {s.steps} steps"


def work_hda(p: Probe, t: Any, s: Any) -> "tuple[float, str]":
    study = s.comparisons
    n = min(p.n_train, int(s.train_sample or p.n_train))
    vae = _steps_of(s.vae.epochs, n, s.vae.batch_size, s.vae.max_steps) * s.vae.batch_size * p.own * 2
    queries = 2 * s.n_seeds * s.ga.population * (s.ga.generations + 1)
    ga = queries * (p.fwd + p.ssim)  # a query and its SSIM
    w = vae + min(s.pool, p.n_eval) * p.grad + ga
    what = f"VAE, GA {queries} queries"
    if study:
        rb = s.robustness
        amls = rb.n_balls * rb.particles * rb.mh_steps * 10 * p.fwd
        ref = s.fid.epochs * min(n, s.fid.train) * p.own
        base = 3 * ga  # FODA, PGD and coverage on the same seeds
        ft = 3 * s.finetune.epochs * (s.finetune.train + s.finetune.seeds * s.finetune.cases_per_seed) * p.grad * 1.5
        w += amls + ref + base + (ft if s.finetune.enabled else 0)
        what += "; Table 4, FID network, baselines, fine-tuning"
    return w, what


def _renders_cost(n: int, scene: Any) -> float:
    return n * scene.resolution**2 * scene.samples * 1e-6


def work_render(scene: Any) -> "tuple[float, str]":
    n = len(scene.classes) * (scene.train_instances + scene.val_instances) * scene.views_per_instance
    return _renders_cost(n, scene) / max(1, int(scene.workers or 1)), f"{n} renders"


def _examined(s: Any, scene: Any) -> int:
    """How many classes the examiner examines: ``classes`` (a count, or names; None: every class of the scene)."""
    return s.classes if isinstance(s.classes, int) else len(s.classes or scene.classes)


def work_examine(p: Probe, t: Any, s: Any, scene: Any) -> "tuple[float, str]":
    classes = _examined(s, scene)
    per = sum(s.T * s.queries_per_iteration(e) for e in s.examiners) + s.n_random + 2 * s.regions.n_confirm * 3
    n = classes * s.repeats * per
    gp = classes * s.repeats * s.T**2 * 2e-4 if "bo" in s.examiners else 0.0
    return _renders_cost(n, scene) + n * p.fwd + gp, f"{classes} classes x {s.repeats} repeats, {n} renders"


def work_examine_study(p: Probe, s: Any, scene: Any) -> "tuple[float, str]":
    """The examiner's study (stage ``examine_study``, priced on the scene target whose model it reads): the renders of
    its experiments' sessions (the order check's three, the strength mode's, Table 3's and the planted weakness's,
    with their T = 0 sets), the planted weakness's training set rendered again, and the epochs of the models it
    trains itself (the full model too unless ``full_model`` names a target's)."""
    st = s.study
    q = s.queries_per_iteration
    examined = _examined(s, scene)
    k = len(st.classes) if st.classes else examined
    n, trained, gp = 0, 0.0, 0.0
    if st.order_check or st.strength:
        n += k * (s.n_random + (3 * st.T * q("rl") if st.order_check else 0))
        n += k * st.T * q(st.strength_examiner) if st.strength else 0
        trained += 0 if st.full_model else p.n_train
    ms, aw = st.m_study, st.artificial_weakness
    if ms.enabled:
        km = len(ms.classes) if ms.classes else examined
        n += len(ms.values) * km * (ms.T * sum(q(e) for e in ms.examiners) + s.n_random)
        views = scene.views_per_instance
        trained += sum(p.n_train * m / views for m in ms.values if m < views)
        gp += len(ms.values) * km * ms.T**2 * 2e-4 if "bo" in ms.examiners else 0.0
    if aw.enabled:
        ka = len(aw.classes) if aw.classes else examined
        n += p.n_train + ka * (aw.T * sum(q(e) for e in aw.examiners) + s.n_random)
        trained += p.n_train
        gp += ka * aw.T**2 * 2e-4 if "bo" in aw.examiners else 0.0
    w = _renders_cost(n, scene) + n * p.fwd + st.epochs * trained * p.grad * 1.5 + gp
    return w, f"{n} renders, {st.epochs} epochs x {int(trained)} images"


def _study_target(s: Any, data: Mapping[str, Any]) -> Optional[str]:
    """The scene target the examiner's study prices its work on: ``study.full_model``, else the first scene target."""
    targets = data.get("targets") or {}
    scenes = [n for n, t in targets.items() if ((t or {}).get("data") or {}).get("source") == "scenes"]
    return s.study.full_model if s.study.full_model in scenes else next(iter(scenes), None)


def work_gad(p: Probe, t: Any, s: Any) -> "tuple[float, str]":
    w = len(s.seeds) * (s.design_points * s.epochs * 1e-5 + s.replicates * s.budget * 1e-3 + p.n_train / 1000.0)
    return w, f"{len(s.seeds)} seeds x {s.design_points} design points"


WORK: Dict[str, Callable[..., "tuple[float, str]"]] = {
    "train": work_train,
    "segments": work_segments,
    "robustness": work_robustness,
    "intrinsic": work_intrinsic,
    "corner": work_corner,
    "hda": work_hda,
    "gad": work_gad,
}


# --------------------------------------------------------------------------------------------------- the audit
def stage_work(stages: Sequence[str], data: Mapping[str, Any], threads: int = 1) -> List[StageWork]:
    """Each stage's work (:class:`StageWork`), from params.yaml's content ``data``; the probes run once per
    target."""
    from weakspot.config import target_of, validate_section

    names = list((data.get("targets") or {}).keys())
    targets: Dict[str, Any] = {}  # validated once per target, as its probe runs once
    probes: Dict[str, Probe] = {}
    scene = validate_section("scene", dict(data))
    out = []
    for stage in stages:
        step, _, rest = stage.partition("-")
        target = rest if rest in names else None
        if stage == "examine_study":  # priced on the scene target whose model it reads
            study = validate_section("examine", dict(data))
            target = _study_target(study, data)
        if target is not None and target not in probes:
            targets[target] = target_of(target, dict(data))
            probes[target] = probe_target(targets[target], data, threads)
        p = probes.get(target) if target else None
        t = targets.get(target) if target else None
        if stage == "examine_study" and p is not None:
            w, what = work_examine_study(p, study, scene)
            target = None  # one stage for the audit: its key is its own
        elif stage == "render":
            w, what = work_render(scene)
        elif step == "examine" and p is not None:
            s = validate_section("examine", dict(data), target=target)
            w, what = work_examine(p, t, s, scene)
        elif step in WORK and p is not None:
            s = validate_section(step, dict(data), target=target) if step != "train" else None
            w, what = WORK[step](p, t, s)
        else:  # prepare, report: what they cost besides their overhead is small or fitted
            w, what = 1.0, "fixed"
        name = step if target or stage == "render" else stage
        key = f"{name}:table" if p is not None and not p.image else name
        if step == "train" and p is not None and p.image and not t.trains:
            key = "train:eval"  # a user's trained model: the stage evaluates it
        out.append(StageWork(stage, name, target, float(w), what, key))
    return out


def last_times(store: "str | Path") -> Dict[str, Dict[str, Any]]:
    """Each stage's last recorded time and work (``history/<audit>.stages.json``, the newest audit first)."""
    seen: Dict[str, Dict[str, Any]] = {}
    for f in sorted(Path(store).glob("*.stages.json"), reverse=True):
        try:
            rows = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        for stage, row in (rows.get("stages") or {}).items():
            if stage not in seen and row.get("seconds") is not None:
                seen[stage] = {**row, "audit": f.name.split(".")[0]}
    return seen


def attach_last(works: List[StageWork], store: "str | Path") -> None:
    last = last_times(store)
    for w in works:
        row = last.get(w.stage)
        if row:
            w.last = float(row["seconds"])
            w.same_work = row.get("counted") == w.counted and abs(float(row.get("work", -1)) - w.work) <= 0.25 * w.work


def wall_time(works: Sequence[StageWork], needs: Mapping[str, Sequence[str]], workers: int, cores: int) -> float:
    """The audit's wall time if its stages take their estimates: list scheduling of the stages (the longest ready
    stage first) on ``min(workers, cores)`` parallel slots, a stage starting once the stages it needs ended."""
    est = {w.stage: w.seconds for w in works}
    slots = [0.0] * max(1, min(int(workers), int(cores)))
    done: Dict[str, float] = {}
    left = [w.stage for w in works]
    while left:
        ready = [s for s in left if all(n in done or n not in est for n in needs.get(s, []))]
        s = max(ready or left, key=lambda x: est[x])
        start = max([min(slots)] + [done[n] for n in needs.get(s, []) if n in done])
        i = slots.index(min(slots))
        done[s] = start + est[s]
        slots[i] = done[s]
        left.remove(s)
    return max(done.values(), default=0.0)


def table(works: Sequence[StageWork]) -> str:
    """The estimate as lines: stage, estimate, the last audit's time, what was counted."""
    lines = [f"  {'stage':28s} {'estimate':>9s} {'last':>7s}  work counted"]
    for w in works:
        last = f"{w.last:.0f} s" if w.last is not None else "-"
        mark = " (same work)" if w.same_work else ""
        lines.append(f"  {w.stage:28s} {w.seconds:7.0f} s {last:>7s}  {w.counted}{mark}")
    return "\n".join(lines)


def record_row(w: StageWork, seconds: Optional[float]) -> Dict[str, Any]:
    return {
        "step": w.step,
        "key": w.key or w.step,
        "target": w.target,
        "seconds": seconds,
        "estimate": round(w.seconds, 1),
        "work": round(w.work, 4),
        "counted": w.counted,
    }
