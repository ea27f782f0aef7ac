"""The defended models that seeds/002 (Yu et al. 2019, "Interpreting and Evaluating Neural Network Robustness",
IJCAI) compares its robustness score across (Sec. 5.1, Tables 1-3): FGSM adversarial training, min-max (PGD)
training, input-gradient regularisation and defensive distillation, each as a training loss for
:func:`weakspot.models.train.train_torch_classifier` (its ``loss_fn`` hook).

Caveats first:

* Every defence trains the module it is given *in place*: pass a freshly built, seeded architecture to train a
  defended model from scratch, or a copy of the model under audit to fine-tune it (the caller decides).
* Adversarial examples are crafted with the module in **eval mode** (then it is switched back to train mode for the
  update): batch norm uses its running statistics during the attack, and the attack's forward passes neither
  update those statistics nor see a batch mixing clean and attacked inputs. Madry et al.'s own code crafts in
  training mode; on a model without batch norm or dropout the two are the same.
* ``train_accuracy`` in the returned history is the accuracy on what was trained on: the mixed clean/adversarial
  batch (``fgsm_at``), the PGD examples (``minmax``), the clean batch (``gradreg``, ``distillation``).
* ``gradreg`` differentiates twice (``create_graph=True``); with batch norm in train mode the gradient of the
  summed loss with respect to one input also flows through the batch statistics (a term of order 1/batch), which
  the penalty keeps, as double backpropagation on the training graph does.
* ``distillation`` deploys at temperature 1: the returned module's raw logits are about ``T`` times those of a
  naturally trained one, which saturates the softmax: the cross-entropy's input gradient underflows to exactly 0 on
  most inputs (on digits, ~90 % of held-out inputs), so FGSM and PGD on the cross-entropy stall -- gradient masking,
  not robustness (seeds/002 Sec. 5.3, Table 3: PGD-30 accuracy 97.1 %, C&W-30 0.0 % on MNIST). The *mean*
  gradient norm is not smaller: the few misclassified inputs have gradients ~T times a natural model's.
* Not implemented: gradient inhibition (Liu et al. 2018), the paper's other masking defence.
* Deterministic: the batch order and PGD's random starts come from the training loop's seeded generator, so the
  same module weights, data and seed give identical weights on CPU.

Registry: :data:`DEFENCES` maps a name to a trainer ``fn(fit, module, *, eps, clip, **options) -> dict``; its
keyword-only options (with their defaults) are the valid ``options`` of :func:`train_defence`.

Example
-------
>>> import numpy as np, torch
>>> X = np.random.default_rng(0).uniform(size=(64, 2)).astype("float32"); y = (X[:, 0] > 0.5).astype(int)
>>> _ = torch.manual_seed(0)
>>> net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> net, info = train_defence("minmax", net, X, y, eps=0.1, epochs=2, lr=1e-2, batch_size=16, seed=0,
...                           options={"steps": 3})
>>> info["label"], info["settings"]["step_size"]
('PGD-3 min-max (eps 0.1, step 0.08333, 2 epochs)', 0.08333333333333333)
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from weakspot.checks import check_clip, check_int, check_number
from weakspot.errors import ConfigError, DataError
from weakspot.adversarial.attacks import fgsm, pgd
from weakspot.models.nets import LossFn
from weakspot.models.train import train_torch_classifier
from weakspot.fmt import fmt
from weakspot.progress import Progress
from weakspot.registry import Registry

Clip = Tuple[float, float]

DEFENCES = Registry("defence")
"""name -> trainer ``fn(fit, module, *, eps, clip, **options) -> {"history", "settings", "label", ...}``, where
``fit(module, loss_fn, phase) -> history`` runs :func:`train_torch_classifier` with the caller's training settings."""

Fit = Callable[[torch.nn.Module, LossFn, str], Dict[str, Any]]

#: Kurakin et al. 2016, "Adversarial machine learning at scale" (ICLR 2017), Sec. 3: lambda = 0.3 on the
#: adversarial examples, k = m/2 of each minibatch of m replaced by adversarial ones.
KURAKIN_LAMBDA = 0.3
KURAKIN_FRACTION = 0.5
#: Madry et al. 2018, "Towards deep learning models resistant to adversarial attacks" (ICLR), Sec. 4 / App.:
#: MNIST eps 0.3, 40 steps of 0.01; CIFAR10 eps 8/255, 7 steps of 2/255. Our default takes CIFAR's 7 steps, at
#: any eps, with the step-size rule 2.5 * eps / steps (Madry et al.'s rule of thumb, as ``attacks.pgd``).
MADRY_STEPS = 7
#: Ross & Doshi-Velez 2018, "Improving the adversarial robustness and interpretability of deep neural networks by
#: regularizing their input gradients" (AAAI), report lambda_DB = 100 for MNIST, in their own code's normalisation
#: of the penalty. In ours (the per-example squared norm, averaged over the batch) 100 collapses a 64-64-32-10 MLP
#: on 8x8 digits to a constant predictor (clean accuracy 0.13; 3 already costs 35 points). Our default 0.1 keeps
#: digits' clean accuracy within ~2 points of natural training and raises PGD-20 accuracy at eps 0.1 from ~0.26 to
#: ~0.55, with headroom for larger inputs (the squared norm grows with the input's size): tune it per data set.
ROSS_LAMBDA_PAPER = 100.0
ROSS_LAMBDA = 0.1
#: Papernot et al. 2016, "Distillation as a defense to adversarial perturbations against deep neural networks"
#: (IEEE S&P), Sec. V: temperature T = 100 for MNIST.
PAPERNOT_TEMPERATURE = 100.0


def _who(defence: str) -> str:
    return f"defence {defence!r}"


def _craft(module: torch.nn.Module, attack: Callable[[], torch.Tensor]) -> torch.Tensor:
    """Run ``attack()`` with ``module`` in eval mode (batch norm on running statistics, which the attack's forward
    passes leave alone; no dropout), then put the module back in the mode it was in."""
    was_training = module.training
    module.eval()
    try:
        return attack()
    finally:
        module.train(was_training)


# ---------------------------------------------------------------- losses (usable with train_torch_classifier)


def fgsm_at_loss(
    *, eps: float, clip: Clip = (0.0, 1.0), lam: float = KURAKIN_LAMBDA, fraction: float = KURAKIN_FRACTION
) -> LossFn:
    """Kurakin et al.'s adversarial-training loss (Sec. 3, "Adversarial machine learning at scale", ICLR 2017).

    The first ``k = round(fraction * m)`` examples of each batch of ``m`` (the batch order is a seeded permutation,
    so these are random ones) are replaced by their FGSM examples at ``eps`` (crafted on the current model, in eval
    mode); the loss is ``(sum_clean CE + lam * sum_adv CE) / (m - k + lam * k)``. One forward pass on the mixed
    batch (batch norm sees both, as in the paper); returns the mixed batch's logits.
    """
    lam, fraction = float(lam), float(fraction)

    def loss_fn(module: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor, gen: torch.Generator):
        m = int(xb.shape[0])
        k = min(m, int(np.floor(fraction * m + 0.5)))
        if k > 0:
            x_adv = _craft(module, lambda: fgsm(module, xb[:k], yb[:k], eps=eps, clip=clip))
            xb = torch.cat([x_adv, xb[k:]])
        out = module(xb)
        ce = F.cross_entropy(out, yb, reduction="none")
        weight = torch.ones(m, dtype=ce.dtype, device=ce.device)
        weight[:k] = lam
        return (weight * ce).sum() / weight.sum(), out

    return loss_fn


def minmax_loss(
    *, eps: float, steps: int = MADRY_STEPS, step_size: Optional[float] = None, clip: Clip = (0.0, 1.0)
) -> LossFn:
    """Madry et al.'s min-max loss: the cross-entropy of PGD examples only (``steps`` steps of ``step_size``, default
    ``2.5 * eps / steps``, from a uniform random start in the eps-ball drawn from the loop's generator; crafted in
    eval mode). Returns the adversarial examples' logits."""

    def loss_fn(module: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor, gen: torch.Generator):
        x_adv = _craft(
            module,
            lambda: pgd(
                module,
                xb,
                yb,
                eps=eps,
                steps=steps,
                step_size=step_size,
                random_start=True,
                loss="ce",
                clip=clip,
                generator=gen,
            ),
        )
        out = module(x_adv)
        return F.cross_entropy(out, yb), out

    return loss_fn


def gradreg_loss(*, lam: float = ROSS_LAMBDA) -> LossFn:
    """Ross & Doshi-Velez's double-backpropagation loss: ``mean_i CE_i + lam * mean_i sum_d (dCE_i / dx_id)^2``
    (their penalised loss, summed over the training set, divided by the batch size; the gradient is differentiated
    again, ``create_graph=True``)."""
    lam = float(lam)

    def loss_fn(module: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor, gen: torch.Generator):
        x = xb.detach().requires_grad_(True)
        out = module(x)
        ce = F.cross_entropy(out, yb, reduction="none")
        (g,) = torch.autograd.grad(ce.sum(), x, create_graph=True)
        penalty = g.pow(2).flatten(1).sum(1).mean()
        return ce.mean() + lam * penalty, out

    return loss_fn


def temperature_loss(*, temperature: float) -> LossFn:
    """Cross-entropy of ``softmax(z / T)`` against the hard labels (Papernot et al.'s teacher, Sec. IV-B)."""
    t = float(temperature)

    def loss_fn(module: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor, gen: torch.Generator):
        out = module(xb)
        return F.cross_entropy(out / t, yb), out

    return loss_fn


def soft_label_loss(teacher: torch.nn.Module, *, temperature: float) -> LossFn:
    """Cross-entropy of ``softmax(z / T)`` against the teacher's soft labels ``softmax(z_teacher / T)`` of the same
    (augmented) batch, computed in eval mode without gradients (Papernot et al.'s distilled network, Sec. IV-B)."""
    t = float(temperature)

    def loss_fn(module: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor, gen: torch.Generator):
        teacher.eval()
        with torch.no_grad():
            soft = F.softmax(teacher(xb) / t, dim=1)
        out = module(xb)
        return -(soft * F.log_softmax(out / t, dim=1)).sum(1).mean(), out

    return loss_fn


# ---------------------------------------------------------------- the registered defences


@DEFENCES.register("fgsm_at")
def fgsm_at(
    fit: Fit,
    module: torch.nn.Module,
    *,
    eps: float,
    clip: Clip,
    lam: float = KURAKIN_LAMBDA,
    fraction: float = KURAKIN_FRACTION,
) -> Dict[str, Any]:
    """FGSM adversarial training: Kurakin, Goodfellow & Bengio, "Adversarial machine learning at scale", ICLR 2017
    (arXiv 2016), Sec. 3 (seeds/002's "AdvTrain", Table 1).

    Options
    -------
    lam : float, default 0.3
        Weight of the adversarial examples' loss (the paper's lambda = 0.3), > 0.
    fraction : float, default 0.5
        Share ``k/m`` of each batch replaced by FGSM examples (the paper's k = m/2), in (0, 1].

    The paper draws eps per example from a truncated normal and favours the least-likely-class step ("step l.l.")
    against label leaking; here every adversarial example uses the one ``eps`` and the true-label FGSM, as
    seeds/002 describes its AdvTrain models.
    """
    eps = check_number(eps, "eps", _who("fgsm_at"), low=0)
    lam = check_number(lam, "lam", _who("fgsm_at"), low=0)
    fraction = check_number(fraction, "fraction", _who("fgsm_at"), low=0, high=1)
    history = fit(module, fgsm_at_loss(eps=eps, clip=clip, lam=lam, fraction=fraction), "fgsm_at")
    return {
        "history": history,
        "settings": {"eps": eps, "lam": lam, "fraction": fraction, "clip": list(clip)},
        "label": f"FGSM adversarial training (eps {fmt(eps, 4)}, {fraction:.0%} adversarial, lambda {fmt(lam, 4)})",
    }


@DEFENCES.register("minmax")
def minmax(
    fit: Fit,
    module: torch.nn.Module,
    *,
    eps: float,
    clip: Clip,
    steps: int = MADRY_STEPS,
    step_size: Optional[float] = None,
) -> Dict[str, Any]:
    """Min-max (PGD) adversarial training: Madry, Makelov, Schmidt, Tsipras & Vladu, "Towards deep learning models
    resistant to adversarial attacks", ICLR 2018 (seeds/002's "MinMax", Tables 1-3): every batch is replaced by its
    PGD examples (cross-entropy, uniform random start), and only those are trained on.

    Options
    -------
    steps : int, default 7
        PGD steps per batch. Madry et al. use 7 on CIFAR10 (at eps 8/255) and 40 on MNIST (at eps 0.3); 7 is
        our default for every data set (CIFAR's, the cheaper one).
    step_size : float or None, default None
        None: ``2.5 * eps / steps`` (Madry et al.'s rule of thumb; ours as a default -- their own step sizes are
        2/255 on CIFAR10 and 0.01 on MNIST, which give ``step_size=2/255`` or ``steps=40, step_size=0.01``).
    """
    eps = check_number(eps, "eps", _who("minmax"), low=0)
    steps = check_int(steps, "steps", _who("minmax"))
    alpha = 2.5 * eps / steps if step_size is None else check_number(step_size, "step_size", _who("minmax"), low=0)
    history = fit(module, minmax_loss(eps=eps, steps=steps, step_size=alpha, clip=clip), "minmax")
    return {
        "history": history,
        "settings": {
            "eps": eps,
            "steps": steps,
            "step_size": alpha,
            "random_start": True,
            "loss": "ce",
            "clip": list(clip),
        },
        "label": f"PGD-{steps} min-max (eps {fmt(eps, 4)}, step {fmt(alpha, 4)})",
    }


@DEFENCES.register("gradreg")
def gradreg(fit: Fit, module: torch.nn.Module, *, eps: float, clip: Clip, lam: float = ROSS_LAMBDA) -> Dict[str, Any]:
    """Input-gradient regularisation (double backpropagation): Ross & Doshi-Velez, "Improving the adversarial
    robustness and interpretability of deep neural networks by regularizing their input gradients", AAAI 2018
    (seeds/002's "GradReg", Table 2). ``eps`` and ``clip`` are not used.

    Options
    -------
    lam : float, default 0.1
        Weight of the mean squared L2 norm of the cross-entropy's input gradient, >= 0. Ours, not the paper's: Ross
        & Doshi-Velez report lambda_DB = 100 on MNIST in their code's normalisation; in this one 100 collapses a
        digits MLP to a constant predictor (see :data:`ROSS_LAMBDA`). The right value scales with the inverse
        square of the input's units and shrinks as inputs grow: sweep it for a new data set.
    """
    lam = check_number(lam, "lam", _who("gradreg"), low=0, low_open=False)
    history = fit(module, gradreg_loss(lam=lam), "gradreg")
    return {
        "history": history,
        "settings": {"lam": lam},
        "label": f"input-gradient regularisation (lambda {fmt(lam, 4)})",
    }


@DEFENCES.register("distillation")
def distillation(
    fit: Fit,
    module: torch.nn.Module,
    *,
    eps: float,
    clip: Clip,
    temperature: float = PAPERNOT_TEMPERATURE,
    warm_start: bool = False,
) -> Dict[str, Any]:
    """Defensive distillation: Papernot, McDaniel, Wu, Jha & Swami, "Distillation as a defense to adversarial
    perturbations against deep neural networks", IEEE S&P 2016 (seeds/002's "Distillation", Table 3).
    ``eps`` and ``clip`` are not used.

    Phase 1 trains a teacher (a deep copy of ``module`` as given) on the hard labels at temperature ``T``
    (cross-entropy of ``softmax(z / T)``); phase 2 trains ``module`` (from the same initial weights, with the same
    settings and seed) at temperature ``T`` on the teacher's soft labels ``softmax(z_teacher / T)``. The module is
    deployed at temperature 1 (its raw logits). Each phase runs the caller's ``epochs``.

    Options
    -------
    temperature : float, default 100
        The paper's T = 100 (MNIST), > 0.
    warm_start : bool, default False
        ``module`` is already trained at temperature 1 (fine-tuning a model under audit, ours): its last linear layer
        is first scaled by ``T``, so that at temperature ``T`` it predicts exactly as it did at 1 and both phases start
        from a trained network. Without it a trained network's ``softmax(z / T)`` is nearly uniform and a short
        fine-tune barely moves it (measured on the scene CNN: teacher loss 2.19 ~ ln 10 after an epoch).
    """
    t = check_number(temperature, "temperature", _who("distillation"), low=0)
    if warm_start:
        from weakspot.models.rescale import scaled_last_layer

        module.load_state_dict(scaled_last_layer(module, t).state_dict())
    teacher = copy.deepcopy(module)
    teacher_history = fit(teacher, temperature_loss(temperature=t), "distillation teacher")
    history = fit(module, soft_label_loss(teacher, temperature=t), "distillation student")
    return {
        "history": history,
        "teacher_history": teacher_history,
        "settings": {"temperature": t, "deployed_temperature": 1.0, "warm_start": bool(warm_start)},
        "label": f"defensive distillation (T {fmt(t, 4)}, deployed at T 1{', warm start' if warm_start else ''})",
    }


def defence_options(name: str) -> Dict[str, Any]:
    """The options of defence ``name`` and their defaults (``ConfigError`` listing the valid names if unknown)."""
    fn = DEFENCES.get(name)
    return {
        p.name: p.default
        for p in inspect.signature(fn).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in ("eps", "clip")
    }


# ---------------------------------------------------------------- entry point


def train_defence(
    name: str,
    module: torch.nn.Module,
    X: Any,
    y: Any,
    *,
    eps: float,
    clip: Clip = (0.0, 1.0),
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    device: Any = "cpu",
    lr_schedule: str = "constant",
    augment: Optional[str] = None,
    weight_decay: float = 0.0,
    options: Optional[Mapping[str, Any]] = None,
    progress: Optional[Progress] = None,
) -> Tuple[torch.nn.Module, Dict[str, Any]]:
    """Train ``module`` in place with the defence ``name``; return it and what ran.

    Parameters
    ----------
    name : {"fgsm_at", "minmax", "gradreg", "distillation"}
        A name in :data:`DEFENCES` (see each trainer for its paper and options).
    module : torch.nn.Module
        Maps ``(n, ...)`` float32 inputs to logits; trained in place (a fresh seeded architecture, or a copy of a
        model to fine-tune). Returned in eval mode on ``device``.
    X, y : arrays
        Training inputs ``(n, ...)`` inside ``clip`` and integer labels ``(n,)``.
    eps : float
        L-inf radius of the training attack (``fgsm_at``, ``minmax``; must be > 0 there), in the data's units.
        seeds/002 Sec. 5.1 evaluates at 0.3 (MNIST), 8/255 (CIFAR10), 16/255 (ImageNet). Not used by ``gradreg``
        and ``distillation``.
    clip : (float, float), default (0.0, 1.0)
        The data's range; adversarial examples are clipped to it.
    epochs, lr, batch_size, seed, device, lr_schedule, augment, weight_decay
        As :func:`weakspot.models.train.train_torch_classifier` (Adam); no default is a paper's, the caller's
        training settings are used. ``distillation`` runs ``epochs`` for each of its two phases.
    options : dict, optional
        The defence's options (:func:`defence_options`); unknown keys raise ``ConfigError`` naming the valid ones.
    progress : callable(what, done, total), optional
        Passed to the training loop, with ``what`` prefixed by the defence (``"minmax: epoch (loss 0.412)"``;
        ``"distillation teacher: ..."`` and ``"distillation student: ..."``).

    Returns
    -------
    module : torch.nn.Module
        The same object, trained.
    info : dict
        ``history`` (the loop's per-epoch history; for ``distillation`` the student's, the teacher's under
        ``teacher_history``), ``settings`` (every setting that ran: the defence's and the training's) and
        ``label`` (a short text saying what ran, e.g. ``"PGD-7 min-max (eps 0.3, step 0.1071, 10 epochs)"``).
    """
    trainer = DEFENCES.get(name)
    valid = defence_options(name)
    options = {} if options is None else options
    if not isinstance(options, Mapping):
        raise ConfigError(
            f"defence {name!r}: options = {options!r} must be a dict of {', '.join(valid) or '(no options)'}"
        )
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(
            f"defence {name!r}: unknown option(s) {', '.join(map(repr, unknown))}; valid options: "
            f"{', '.join(valid) or '(none)'}"
        )
    clip = check_clip(clip, _who(name))
    check_number(eps, "eps", _who(name), low=0, low_open=False)
    if name in ("fgsm_at", "minmax"):
        Xa = np.asarray(X, dtype=np.float32)
        if Xa.size and (np.nanmin(Xa) < clip[0] or np.nanmax(Xa) > clip[1]):
            raise DataError(
                f"defence {name!r}: the training inputs span [{np.nanmin(Xa):.4g}, {np.nanmax(Xa):.4g}], "
                f"outside clip = {clip}; give the data's range as clip"
            )

    def fit(m: torch.nn.Module, loss_fn: LossFn, phase: str) -> Dict[str, Any]:
        cb = None
        if progress is not None:

            def cb(what: str, done: int, total: int) -> None:
                progress(f"{phase}: {what}", done, total)

        return train_torch_classifier(
            m,
            X,
            y,
            epochs=epochs,
            lr=lr,
            batch_size=batch_size,
            seed=seed,
            device=device,
            weight_decay=weight_decay,
            augment=augment,
            lr_schedule=lr_schedule,
            progress=cb,
            loss_fn=loss_fn,
        )

    out = trainer(fit, module, eps=eps, clip=clip, **{**valid, **dict(options)})
    training = {
        "epochs": int(epochs),
        "lr": float(lr),
        "batch_size": int(batch_size),
        "seed": int(seed),
        "lr_schedule": lr_schedule,
        "augment": augment,
        "weight_decay": float(weight_decay),
    }
    ran = f"{int(epochs)} epoch{'s' if int(epochs) != 1 else ''}" + (" per phase" if "teacher_history" in out else "")
    info = {
        "history": out["history"],
        "settings": {"defence": name, **out["settings"], **training},
        "label": f"{out['label'][:-1]}, {ran})",
    }
    if "teacher_history" in out:
        info["teacher_history"] = out["teacher_history"]
    return module, info
