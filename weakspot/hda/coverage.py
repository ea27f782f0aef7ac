"""The coverage-guided testing baseline of the HDA paper: neuron coverage guiding a DeepHunter-style fuzzer.

HDA is Huang et al., "Hierarchical Distribution-Aware Testing of Deep Learning"; it compares its
distribution-aware test generation with coverage-guided testing. Neuron coverage is Pei et al.'s DeepXplore
(SOSP 2017); the fuzzing loop -- a queue of test inputs, random mutations, keep what covers something new -- is
Xie et al.'s DeepHunter (ISSTA 2019).

Caveats first:

* **What neuron coverage measures.** The fraction of neurons that some test input drove above ``threshold`` (0.5 by
  default), each neuron's activation min-max scaled by its range over a reference (training) sample ``X_ref``.
  Neurons are the outputs of every ``nn.ReLU`` module (a conv layer's channel counts as one neuron, its activation
  the spatial mean, as DeepXplore does; a dense layer's unit is one neuron); a model without ``nn.ReLU`` modules
  is hooked at every ``nn.Linear`` / ``nn.Conv2d`` except the last (the logits). ReLUs applied functionally
  (``F.relu``) are invisible to the hooks, and so are the layers of a TorchScript module (``torch.jit.script`` /
  ``trace``: its submodules are ``RecursiveScriptModule`` modules, whose forward hooks never fire): :func:`hookable`
  says why a module has no neurons to hook, and HDA skips the coverage baseline for it. Scaling per neuron over
  ``X_ref`` is DeepHunter's / DeepGauge's reading; DeepXplore scales each layer per input instead. A neuron constant
  over ``X_ref`` (e.g. dead ReLUs) is not scaled (its deviation from that constant is compared with ``threshold`` in
  raw units).
* **Its known weakness.** Neuron coverage is easy to saturate: a handful of ordinary inputs cover most neurons,
  after which the fuzzer's guidance is gone and it degrades to random mutation. It is *not adversarially guided*:
  the labels are never looked at and nothing pushes a mutant towards a decision boundary, so few of the test cases
  are adversarial examples -- the low AE proportion of coverage-guided testing in the HDA paper's Table 6. Higher
  coverage is not evidence of more (or more natural) failures. Nor is the guidance worth much on ordinary models:
  on 20 random-init MLPs (radius 0.1, 200 queries per seed) uniform sampling in the ball reached a higher coverage
  than this fuzzer in 15 and the same in 4. Guidance pays where a neuron is reached only through a chain of
  coverage-increasing steps (``tests/hda/test_coverage.py``'s ladder model).
* **The mutations** (each mutant picks one of three with equal probability, then is projected into its seed's
  L-inf ball of ``radius`` and into ``clip``): (1) *sparse pixel noise* -- a random subset of pixels (each with
  probability ``rho ~ U(0, 0.25)`` drawn per mutant, plus one pixel drawn at random so the subset is never empty)
  gets ``U(-2 radius, 2 radius)`` added (large enough to jump to the opposite face of the ball); (2) *dense noise* --
  every pixel gets ``a * U(-radius, radius)`` with ``a ~ U(0, 1)`` per mutant; (3) *brightness / contrast* --
  ``c * (x - mean(x)) + mean(x) + b`` with ``c ~ U(0.8, 1.2)`` and ``b ~ U(-radius, radius)`` per mutant.
  DeepHunter's affine transformations (translation, rotation, scaling, shear) are left out: they leave an L-inf ball
  at once. "Pixel" means any input element; the mutations work on the flattened input, so tabular rows work too.
* **Seed (parent) selection** is uniform over the seed's queue (DeepHunter's "uniform" strategy), one parent drawn
  per mutant; DeepHunter's power schedule and recency-weighted selection are not implemented.
* **Shared coverage.** All seeds fuzz against one coverage state (as a fuzzer of a whole test suite does); each
  iteration's mutants are credited in a random order, so a neuron that several mutants reach in the same iteration
  goes to a random one of them, not always to the lowest seed index. Because only mutants that cover a new neuron
  join a queue, all queues together grow by at most ``n_neurons`` inputs.
* **Test cases.** A seed's ``n_cases`` test cases are its queue without the seed, most recent first, filled up with
  the latest iterations' other mutants of that seed (most recent iteration first); ``n_cases`` must be at most
  ``iterations * mutants``. With saturated coverage the queues stay short, so most test cases are plain mutants.
* **Cost in queries** (forward passes of one input): ``k`` to credit the seeds' own coverage plus
  ``iterations * k * mutants`` for the mutants -- 8 010 for 10 seeds at the defaults (40 iterations x 20 mutants).
  Nothing else queries the model; building :class:`NeuronCoverage` costs ``len(X_ref)`` more.
* **Determinism.** All randomness comes from one CPU ``torch.Generator`` seeded with ``seed``; on the CPU the same
  seed gives byte-identical test cases. On a GPU, activations (hence which mutants join a queue) can differ in the
  last bits between runs. ``coverage_fuzz`` resets the coverage state it is given at the start and leaves it
  holding the run's final coverage.

Example
-------
>>> import torch, torch.nn as nn
>>> net = nn.Sequential(nn.Flatten(), nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
>>> X = torch.rand(64, 4, generator=torch.Generator().manual_seed(0))
>>> with NeuronCoverage(net, X) as cov:
...     res = coverage_fuzz(net, X[:3], None, [2, 2, 2], 0.1, coverage=cov, iterations=5, mutants=4)
>>> res.X_cases.shape, res.queries
((6, 4), 63)
"""

from __future__ import annotations

import numbers
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union, cast

import numpy as np
import torch
import torch.nn as nn

from weakspot.checks import check_clip, check_int, check_number
from weakspot.errors import ConfigError, DataError, ModelError
from weakspot.progress import Progress

__all__ = ["NeuronCoverage", "FuzzResult", "coverage_fuzz", "hookable"]


def _as_float_tensor(name: str, x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        try:
            t = torch.as_tensor(np.asarray(x, dtype=np.float32))
        except (TypeError, ValueError) as exc:
            raise DataError(f"{name} must be a numeric array, got {type(x).__name__}: {exc}") from None
    if t.ndim < 2:
        raise DataError(f"{name} must be shaped (n, *input_shape) with n >= 1, got shape {tuple(t.shape)}")
    if t.shape[0] < 1:
        raise DataError(f"{name} holds no rows (shape {tuple(t.shape)})")
    if not t.is_floating_point():
        t = t.float()
    if not torch.isfinite(t).all():
        raise DataError(f"{name} holds NaN/inf values")
    return t


NO_NEURONS = (
    "the module has no nn.ReLU submodule and fewer than two nn.Linear/nn.Conv2d layers, so there are no hidden "
    "neurons to hook (functional F.relu calls are not visible to hooks)"
)
TORCHSCRIPT = "the model's layers cannot be hooked (TorchScript)"


def _hidden_layers(module: nn.Module) -> Sequence[Tuple[str, nn.Module]]:
    """The submodules :class:`NeuronCoverage` hooks: every ``nn.ReLU``, else every ``nn.Linear`` / ``nn.Conv2d`` but
    the last; empty when there are none (a TorchScript module's layers are never instances of these)."""
    named: Sequence[Tuple[str, nn.Module]] = [(n, m) for n, m in module.named_modules() if isinstance(m, nn.ReLU)]
    if not named:
        lin = [(n, m) for n, m in module.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
        named = lin[:-1]
    return named


def _why_not_hookable(module: nn.Module) -> str:
    if any(isinstance(m, torch.jit.ScriptModule) for m in module.modules()):
        return TORCHSCRIPT
    return NO_NEURONS


def hookable(module: Any) -> Optional[str]:
    """None when :class:`NeuronCoverage` can hook hidden neurons of ``module``, else why not (one phrase).

    A TorchScript module (``torch.jit.script`` / ``trace``, wrapped or not) has no layer a forward hook fires on:
    its submodules are ``RecursiveScriptModule`` modules that run inside the compiled program.

    Examples
    --------
    >>> import torch.nn as nn
    >>> hookable(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2))) is None
    True
    >>> hookable(torch.jit.script(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2))))
    "the model's layers cannot be hooked (TorchScript)"
    """
    if not isinstance(module, nn.Module):
        return f"the model is not a torch.nn.Module ({type(module).__name__})"
    return None if _hidden_layers(module) else _why_not_hookable(module)


class NeuronCoverage:
    """Neuron coverage (DeepXplore) of a PyTorch module, accumulated over the inputs passed to :meth:`update`.

    Parameters
    ----------
    module : torch.nn.Module
        The model under test. It is run in eval mode under ``torch.no_grad`` (each submodule's training flag is
        restored afterwards) and never changed, apart from forward hooks that live until :meth:`close`.
    X_ref : tensor (n, *input_shape)
        Reference (training) sample; each neuron is min-max scaled by its minimum and maximum over it.
    threshold : float, default 0.5
        A neuron is covered when its scaled activation is ``> threshold`` for some input.
    batch : int, default 1024
        Rows per forward pass.

    Attributes
    ----------
    n_neurons : int
    covered : bool tensor (n_neurons,)
    layers : list of str
        Names of the hooked submodules.
    lo, hi : float tensors (n_neurons,)
        Each neuron's minimum and maximum over ``X_ref``.

    Use it as a context manager (or call :meth:`close`) so the hooks are removed.
    """

    def __init__(self, module: nn.Module, X_ref: Any, *, threshold: float = 0.5, batch: int = 1024):
        if not isinstance(module, nn.Module):
            raise ConfigError(f"NeuronCoverage: module must be a torch.nn.Module, got {type(module).__name__}")
        self.threshold = check_number(threshold, "threshold", "NeuronCoverage")
        self.batch = check_int(batch, "batch", "NeuronCoverage")
        self.module = module
        X_ref = _as_float_tensor("NeuronCoverage: X_ref", X_ref)

        named = _hidden_layers(module)
        if not named:
            raise ConfigError(f"NeuronCoverage: {_why_not_hookable(module)}")
        self.layers: List[str] = [n or "<module>" for n, _ in named]
        self._buf: List[torch.Tensor] = []
        self._capturing = False
        self._handles = [m.register_forward_hook(self._hook) for _, m in named]
        self._closed = False
        try:
            lo = hi = None
            for acts in self._raw_batches(X_ref):
                blo, bhi = acts.min(dim=0).values, acts.max(dim=0).values
                lo = blo if lo is None else torch.minimum(lo, blo)
                hi = bhi if hi is None else torch.maximum(hi, bhi)
        except Exception:
            self.close()
            raise
        assert lo is not None and hi is not None  # X_ref holds a row at least: one batch at least
        self.lo, self.hi = lo, hi
        self.n_neurons = int(lo.numel())
        rng = hi - lo
        self._scale = torch.where(rng > 0, rng, torch.ones_like(rng))
        self.covered = torch.zeros(self.n_neurons, dtype=torch.bool)

    # -- hooks and forward passes ----------------------------------------------------------------------------------
    def _hook(self, mod: nn.Module, inputs: Any, output: Any) -> None:
        if not self._capturing:
            return
        out = output[0] if isinstance(output, (tuple, list)) else output
        if not isinstance(out, torch.Tensor) or out.ndim < 2:
            raise ModelError(
                f"NeuronCoverage: a hooked layer returned {type(out).__name__} "
                f"of shape {tuple(getattr(out, 'shape', ()))}; expected a (n, features, ...) tensor"
            )
        out = out.detach().float()
        # reduce at once (a new tensor: safe against later in-place ops); a channel's activation is its spatial mean
        self._buf.append(out.flatten(2).mean(dim=2) if out.ndim > 2 else out.clone())

    def _device_dtype(self) -> Tuple[torch.device, torch.dtype]:
        for p in self.module.parameters():
            return p.device, (p.dtype if p.is_floating_point() else torch.float32)
        for b in self.module.buffers():
            return b.device, torch.float32
        return torch.device("cpu"), torch.float32

    def _raw_batches(self, x: torch.Tensor):
        if self._closed:
            raise ConfigError("NeuronCoverage is closed (its hooks are removed); make a new one")
        dev, dtype = self._device_dtype()
        flags = [(m, m.training) for m in self.module.modules()]
        n_expected = getattr(self, "n_neurons", None)
        try:
            self.module.eval()
            with torch.no_grad():
                for i in range(0, x.shape[0], self.batch):
                    self._buf = []
                    self._capturing = True
                    try:
                        self.module(x[i : i + self.batch].to(device=dev, dtype=dtype))
                    finally:
                        self._capturing = False
                    if not self._buf:
                        raise ModelError("NeuronCoverage: no hooked layer ran in the forward pass")
                    acts = torch.cat(self._buf, dim=1).cpu()
                    self._buf = []
                    if n_expected is not None and acts.shape[1] != n_expected:
                        raise ModelError(
                            f"NeuronCoverage: the forward pass produced {acts.shape[1]} neurons, "
                            f"{n_expected} with X_ref; inputs must have X_ref's shape"
                        )
                    yield acts
        finally:
            for m, t in flags:
                m.training = t

    # -- public API ------------------------------------------------------------------------------------------------
    def activations(self, x: Any) -> torch.Tensor:
        """Scaled activations ``(a - lo) / (hi - lo)`` of every neuron, float32 ``(n, n_neurons)`` on the CPU."""
        x = _as_float_tensor("NeuronCoverage.activations: x", x)
        parts = [(a - self.lo) / self._scale for a in self._raw_batches(x)]
        return torch.cat(parts, dim=0)

    def update(self, x: Any) -> torch.Tensor:
        """Mark the neurons that the rows of ``x`` cover; int64 ``(n,)``: how many *new* neurons each row covers.

        Rows are processed in order: a neuron first covered by row 3 counts for row 3 only.
        """
        fires = self.activations(x) > self.threshold  # (n, N)
        new = fires & ~self.covered
        n = new.shape[0]
        gains = torch.zeros(n, dtype=torch.int64)
        has = new.any(dim=0)
        if has.any():
            first = new[:, has].to(torch.uint8).argmax(dim=0)  # first row that fires, per newly covered neuron
            gains = torch.bincount(first, minlength=n).to(torch.int64)
            self.covered |= has
        return gains

    @property
    def rate(self) -> float:
        """Covered fraction of the neurons, in [0, 1]."""
        return float(self.covered.sum().item()) / max(self.n_neurons, 1)

    def reset(self) -> None:
        """Forget all coverage."""
        self.covered = torch.zeros(self.n_neurons, dtype=torch.bool)

    def close(self) -> None:
        """Remove the forward hooks (idempotent)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._closed = True

    def __enter__(self) -> "NeuronCoverage":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"NeuronCoverage(n_neurons={getattr(self, 'n_neurons', '?')}, layers={len(self.layers)}, "
            f"threshold={self.threshold}, rate={self.rate if hasattr(self, 'covered') else float('nan'):.3f}"
            f"{', closed' if self._closed else ''})"
        )


@dataclass
class FuzzResult:
    """Test cases of :func:`coverage_fuzz` and what they cost."""

    X_cases: np.ndarray  # float32 (sum n_cases, *input_shape), grouped by seed in seed order
    seed_index: np.ndarray  # int64 (sum n_cases,): the seed each test case was fuzzed from
    queries: int  # model evaluations (forward passes of one input)
    coverage_rate: float  # neuron coverage at the end
    coverage_curve: List[float] = field(default_factory=list)  # coverage rate after each iteration
    seconds: float = 0.0


def coverage_fuzz(
    module: nn.Module,
    X_seeds: Any,
    y: Any,
    n_cases: Union[int, Sequence[int]],
    radius: float,
    *,
    clip: Optional[Tuple[float, float]] = (0.0, 1.0),
    coverage: NeuronCoverage,
    iterations: int = 40,
    mutants: int = 20,
    seed: int = 0,
    progress: Optional[Progress] = None,
) -> FuzzResult:
    """Coverage-guided fuzzing (DeepHunter-style, neuron coverage) of ``k`` seeds inside their L-inf balls.

    Parameters
    ----------
    module : torch.nn.Module
        The model under test; must be ``coverage.module``.
    X_seeds : array or tensor (k, *input_shape)
        The seeds; each must lie inside ``clip``.
    y : array (k,) or None
        The seeds' labels, accepted for the protocol of the HDA test generators but never used: coverage-guided
        testing is not told the labels.
    n_cases : int or sequence of k ints
        Test cases to return per seed (an int applies to every seed); each in ``[1, iterations * mutants]``.
    radius : float
        L-inf radius of each seed's ball, finite and > 0.
    clip : (lo, hi) or None, default (0, 1)
        Valid input range; None: no clipping.
    coverage : NeuronCoverage
        Coverage of ``module``; reset at the start and shared by all seeds.
    iterations : int, default 40
    mutants : int, default 20
        Mutants per seed per iteration (one batch of ``k * mutants`` inputs per iteration).
    seed : int, default 0
        Seed of the CPU ``torch.Generator`` behind every random choice.
    progress : callable(what, done, total), optional
        Called once per iteration.

    Returns
    -------
    FuzzResult
    """
    t0 = time.perf_counter()
    _check_coverage(coverage, module)
    X = _as_float_tensor("coverage_fuzz: X_seeds", X_seeds).to(device="cpu", dtype=torch.float32)
    k = X.shape[0]
    if y is not None and len(y) != k:
        raise DataError(f"coverage_fuzz: y has {len(y)} labels for {k} seeds (X_seeds)")
    iterations = check_int(iterations, "iterations", "coverage_fuzz")
    mutants = check_int(mutants, "mutants", "coverage_fuzz")
    radius = check_number(radius, "radius", "coverage_fuzz", low=0)
    box = None if clip is None else check_clip(clip, "coverage_fuzz")
    n_list = _n_cases(n_cases, k, iterations * mutants)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ConfigError(f"coverage_fuzz: seed must be an integer, got {seed!r}")
    if box is not None and ((X < box[0]).any() or (X > box[1]).any()):
        raise DataError(f"coverage_fuzz: X_seeds has values outside clip={tuple(box)}; the seeds must be valid inputs")

    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    shape = tuple(X.shape[1:])
    flat = X.reshape(k, -1)
    lo_ball, hi_ball = flat - radius, flat + radius
    if box is not None:
        lo_ball, hi_ball = lo_ball.clamp(min=box[0]), hi_ball.clamp(max=box[1])

    coverage.reset()
    coverage.update(X)  # the seeds' own coverage: mutants get credit only for what the seeds do not cover
    queries = k

    # queues: all entries in one growing tensor, per-seed lists of row indices into it (entry i < k: seed i itself)
    pool = flat.clone()
    queue: List[List[int]] = [[i] for i in range(k)]
    owner = torch.arange(k).repeat_interleave(mutants)  # row r of a batch is a mutant of seed owner[r]
    n_batch = k * mutants
    keep_iters = min(iterations, -(-max(n_list) // mutants))
    recent: List[Tuple[torch.Tensor, torch.Tensor]] = []  # (mutants (n_batch, d), joined (n_batch,)) newest last
    curve: List[float] = []

    for it in range(iterations):
        # parents: uniform over each seed's queue, one per mutant
        lens = torch.tensor([len(q) for q in queue], dtype=torch.float64)
        u = torch.rand(k, mutants, generator=gen, dtype=torch.float64)
        pick = (u * lens[:, None]).floor().long().clamp(max=lens.long()[:, None] - 1)
        rows = torch.tensor([queue[i][j] for i in range(k) for j in pick[i].tolist()], dtype=torch.long)
        parent = pool[rows]

        child = torch.minimum(torch.maximum(_mutate(parent, radius, gen), lo_ball[owner]), hi_ball[owner])

        # credit coverage in a random order (fair across seeds); the mutants that cover something new join queues
        order = torch.randperm(n_batch, generator=gen)
        gains = torch.empty(n_batch, dtype=torch.int64)
        gains[order] = coverage.update(child[order].reshape(n_batch, *shape))
        queries += n_batch
        joined = gains > 0
        new_rows = torch.nonzero(joined).flatten()
        if len(new_rows):
            base = pool.shape[0]
            pool = torch.cat([pool, child[new_rows]], dim=0)
            for j, r in enumerate(new_rows.tolist()):
                queue[r // mutants].append(base + j)
        recent.append((child, joined))
        if len(recent) > keep_iters:
            recent.pop(0)
        curve.append(coverage.rate)
        if progress is not None:
            progress(f"coverage fuzz: iteration (coverage {coverage.rate:.3f})", it + 1, iterations)

    X_cases, index = _test_cases(pool, queue, recent, n_list, mutants, shape)
    return FuzzResult(
        X_cases=X_cases,
        seed_index=index,
        queries=int(queries),
        coverage_rate=coverage.rate,
        coverage_curve=curve,
        seconds=time.perf_counter() - t0,
    )


def _check_coverage(coverage: Any, module: nn.Module) -> None:
    if not isinstance(coverage, NeuronCoverage):
        raise ConfigError(f"coverage_fuzz: coverage must be a NeuronCoverage, got {type(coverage).__name__}")
    if coverage._closed:
        raise ConfigError("coverage_fuzz: coverage is closed; make a new NeuronCoverage")
    if coverage.module is not module:
        raise ConfigError("coverage_fuzz: coverage was built on a different module than `module`")


def _n_cases(n_cases: Union[int, Sequence[int]], k: int, cap: int) -> List[int]:
    """``n_cases`` as one count in [1, cap] per seed (an int applies to every seed)."""
    if isinstance(n_cases, numbers.Integral) and not isinstance(n_cases, bool):
        n_cases = [int(n_cases)] * k
    try:
        n_list = list(cast(Iterable[int], n_cases))  # anything else (a bool) raises the TypeError below
    except TypeError:
        raise ConfigError(f"coverage_fuzz: n_cases must be an int or a sequence of {k} ints, got {n_cases!r}") from None
    if len(n_list) != k:
        raise ConfigError(f"coverage_fuzz: n_cases has length {len(n_list)}, need one count per seed (k={k})")
    n_list = [check_int(v, "every n_cases entry", "coverage_fuzz") for v in n_list]
    if max(n_list) > cap:
        raise ConfigError(
            f"coverage_fuzz: n_cases up to {max(n_list)} exceeds iterations * mutants = {cap}, "
            "the distinct mutants a seed gets; raise iterations or mutants"
        )
    return n_list


def _mutate(parent: torch.Tensor, radius: float, gen: torch.Generator) -> torch.Tensor:
    """One mutant of each row of ``parent`` (n, d): sparse pixel noise, dense noise or brightness / contrast, one
    operator drawn per mutant (see the module's caveats); not yet projected into the ball."""
    n_batch, d = parent.shape
    op = torch.randint(0, 3, (n_batch, 1), generator=gen)
    rho = torch.rand(n_batch, 1, generator=gen) * 0.25
    mask = torch.rand(n_batch, d, generator=gen) < rho
    mask[torch.arange(n_batch), torch.randint(0, d, (n_batch,), generator=gen)] = True  # never a no-op
    sparse = parent + mask * (torch.rand(n_batch, d, generator=gen) * 2 - 1) * (2 * radius)
    amp = torch.rand(n_batch, 1, generator=gen)
    dense = parent + amp * (torch.rand(n_batch, d, generator=gen) * 2 - 1) * radius
    c = 0.8 + 0.4 * torch.rand(n_batch, 1, generator=gen)
    b = (torch.rand(n_batch, 1, generator=gen) * 2 - 1) * radius
    mean = parent.mean(dim=1, keepdim=True)
    bright = c * (parent - mean) + mean + b
    return torch.where(op == 0, sparse, torch.where(op == 1, dense, bright))


def _test_cases(
    pool: torch.Tensor,
    queue: List[List[int]],
    recent: List[Tuple[torch.Tensor, torch.Tensor]],
    n_list: List[int],
    mutants: int,
    shape: Tuple[int, ...],
) -> Tuple[np.ndarray, np.ndarray]:
    """Each seed's test cases: its queue (minus the seed) most recent first, then the latest iterations' other
    mutants; ``(X_cases, seed_index)``."""
    cases, index = [], []
    for i, need in enumerate(n_list):
        got = [pool[r] for r in reversed(queue[i][1:])][:need]
        for child, joined in reversed(recent):
            if len(got) >= need:
                break
            sl = slice(i * mutants, (i + 1) * mutants)
            fresh = child[sl][~joined[sl]]
            got.extend(fresh[: need - len(got)].unbind(0))
        cases.append(torch.stack(got[:need]))
        index.append(np.full(need, i, dtype=np.int64))
    return torch.cat(cases).reshape(-1, *shape).numpy().astype(np.float32, copy=False), np.concatenate(index)
