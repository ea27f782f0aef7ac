"""weakspot.hda.finetune (seeds/004 RQ4): the slow-start fast-decay schedule and fine-tuning a copy of the model."""

import numpy as np
import pytest
import torch

from weakspot.hda.finetune import finetune, slow_start_fast_decay


def test_slow_start_fast_decay_schedule():
    lrs = [slow_start_fast_decay(s, 100, 1e-2) for s in range(100)]
    peak = int(np.argmax(lrs))
    assert lrs[0] == pytest.approx(1e-3) and 25 <= peak <= 32 and lrs[peak] == pytest.approx(1e-2)
    assert all(a <= b for a, b in zip(lrs[:peak], lrs[1 : peak + 1]))
    assert all(a >= b for a, b in zip(lrs[peak:], lrs[peak + 1 :])) and lrs[-1] == pytest.approx(1e-4)


def test_finetuning_on_aes_fixes_them_and_leaves_the_model_unchanged():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 2))
    g = np.random.default_rng(0)
    X = g.random((200, 1, 4, 4)).astype(np.float32)
    y = (X[:, 0, 0, 0] > 0.5).astype(np.int64)
    before = [p.clone() for p in net.parameters()]
    out = finetune(net, X, y, epochs=30, lr=0.05, batch_size=32, seed=0)
    acc = (out["module"](torch.as_tensor(X)).argmax(1).numpy() == y).mean()
    assert acc > 0.9
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
