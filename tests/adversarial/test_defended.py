"""weakspot.adversarial.defended: the defended copies of a target's model, one keyed runtime call each."""

import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from weakspot import methods
from weakspot.adversarial.defended import defended_models, fresh_copy, target_eps, train_defended
from weakspot.data.dataset import Dataset
from weakspot.intrinsic.config import IntrinsicParams
from weakspot.runtime import Runtime
from weakspot.targets import TargetParams

TRAIN = {
    "epochs": 3,
    "lr": 1e-2,
    "batch_size": 32,
    "seed": 0,
    "lr_schedule": "constant",
    "augment": None,
    "weight_decay": 0.0,
}


def _net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))


def _digits(n=240):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return (X[:n] / 16.0).astype(np.float32).reshape(-1, 1, 8, 8), y[:n].astype(np.int64)


def _weights(state_dict_bytes):
    return torch.load(io.BytesIO(state_dict_bytes), weights_only=True)


def test_fresh_copy_reinitialises_from_the_seed_and_leaves_the_rest_alone():
    net = _net(seed=5)
    before = [p.detach().clone() for p in net.parameters()]
    rng = torch.get_rng_state()
    a, b, c = fresh_copy(net, 0), fresh_copy(net, 0), fresh_copy(net, 1)
    assert torch.equal(torch.get_rng_state(), rng)  # the global generator is untouched
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), net.parameters()))
    assert all(torch.equal(p, q) for p, q in zip(before, net.parameters()))


def test_fresh_copy_of_a_torchscript_module_is_refused_not_kept_trained():
    """A TorchScript module has no reset_parameters: "scratch" would keep the trained weights under a from-scratch
    label, so it is an error that says what to use instead."""
    from weakspot.errors import ModelError
    from weakspot.models.scripted import ScriptedModule

    net = _net(seed=5)
    scripted = ScriptedModule(torch.jit.script(net))
    with pytest.raises(ModelError, match="no layer of this ScriptedModule can be re-initialised.*defence_init: target"):
        fresh_copy(scripted, 0)
    assert not all(torch.equal(p, q) for p, q in zip(fresh_copy(net, 0).parameters(), net.parameters()))


def _target(X, y, **params):
    classes = [str(c) for c in range(10)]
    ds = Dataset(X=X, y=y, classes=classes, image_shape=X.shape[1:])
    t = TargetParams.model_validate(
        {"data": {"source": "digits"}, "model": {"kind": "builtin", "arch": "lenet"}, "train": TRAIN}
    )
    return methods.AuditTarget(
        name="toy",
        model=SimpleNamespace(module=_net()),
        classes=classes,
        test=ds,
        val=ds,
        train=ds,
        params=t,
        digest="digest-of-toy",
    )


def test_target_eps_is_the_params_else_section_5_1s_for_the_data():
    X, y = _digits(20)
    assert target_eps(_target(X, y), IntrinsicParams()) == pytest.approx(0.3)  # grey-scale: MNIST's
    assert target_eps(_target(X * 2, y), IntrinsicParams()) == pytest.approx(0.6)  # of the data's range
    colour = np.repeat(X, 3, axis=1)
    assert target_eps(_target(colour, y), IntrinsicParams()) == pytest.approx(8 / 255)  # CIFAR-10's
    assert target_eps(_target(X, y), IntrinsicParams(eps=0.05)) == 0.05


def test_a_defended_model_is_reproducible_and_starts_where_asked():
    X, y = _digits()
    args = (X, y, "fgsm_at", {}, 0.1, [0.0, 1.0])
    # the audited model's weights (seed 7) are not those its architecture starts from (TRAIN's seed 0)
    a = train_defended(_net(7), *args, "target", TRAIN, 1, "cpu")
    b = train_defended(_net(7), *args, "target", TRAIN, 1, "cpu")
    s = train_defended(_net(7), *args, "scratch", TRAIN, 1, "cpu")
    t = train_defended(_net(0), *args, "target", TRAIN, 1, "cpu")
    wa, wb, ws, wt = (_weights(r["state_dict"]) for r in (a, b, s, t))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], ws[k]) for k in wa)
    assert all(torch.equal(ws[k], wt[k]) for k in ws)  # scratch: the architecture re-initialised from TRAIN's seed
    assert a["label"].startswith("FGSM adversarial training (eps 0.1") and a["settings"]["defence"] == "fgsm_at"
    assert a["settings"]["epochs"] == 1 and a["seconds"] >= 0
    d = train_defended(_net(), X, y, "distillation", {"temperature": 10.0}, 0.1, [0.0, 1.0], "target", TRAIN, 1, "cpu")
    assert d["settings"]["warm_start"] is True  # fine-tuning a trained model starts at temperature T


class _Recording(Runtime):
    def __init__(self):
        super().__init__(device="cpu")
        self.seen, self.calls = [], []

    def map(self, fn, calls, *, keys, labels=None):
        self.seen.append((fn, list(keys), list(labels)))
        self.calls.append(list(calls))
        return super().map(fn, calls, keys=keys, labels=labels)


def test_defended_models_are_one_call_per_defence_its_arguments_all_it_depends_on():
    X, y = _digits()
    target = _target(X, y)
    p = IntrinsicParams(defences=["fgsm_at", "gradreg"], defence_epochs=1, defence_options={"gradreg": {"lam": 0.5}})
    rt = _Recording()
    models, info, eps = defended_models(target, ["fgsm_at", "gradreg"], p, rt)
    ((fn, keys, labels),) = rt.seen
    assert fn is train_defended and labels == ["toy, fgsm_at", "toy, gradreg"] and eps == pytest.approx(0.3)
    # a call's key names which call it is; its options, eps and the target are the stage's identity's (tasks/identity.py)
    assert keys == [{"defence": "fgsm_at"}, {"defence": "gradreg"}]
    assert set(models) == {"fgsm_at", "gradreg"} and not models["gradreg"].training
    assert (
        info["gradreg"]["label"] == "input-gradient regularisation (lambda 0.5, 1 epoch) fine-tuned from the "
        "audited model"
    )
    assert info["gradreg"]["eps"] == eps and info["gradreg"]["settings"]["lam"] == 0.5
    # the model handed back is the one the call trained
    again = train_defended(
        target.model.module,
        X,
        y,
        "gradreg",
        {"lam": 0.5},
        eps,
        [0.0, 1.0],
        "target",
        target.params.train.model_dump(mode="json"),
        1,
        "cpu",
    )
    w = _weights(again["state_dict"])
    assert all(torch.equal(w[k], v) for k, v in models["gradreg"].state_dict().items())
    # scratch trains for the target's own epochs
    _, _, _ = defended_models(target, ["fgsm_at"], p.model_copy(update={"defence_init": "scratch"}), rt)
    (args, _), *_ = rt.calls[-1]  # (module, X, y, defence, options, eps, clip, init, train, epochs, device)
    assert args[9] == TRAIN["epochs"] and args[7] == "scratch"
