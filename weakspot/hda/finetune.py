"""Adversarial fine-tuning (seeds/004 RQ4, Table 9): a copy of the audited model trained on training data plus a
method's test cases (labelled with their seed's label), under the "slow start, fast decay" learning-rate schedule
of Jeddi et al. 2021.

Caveats first: the schedule's exact shape is our reading of Jeddi et al. -- a linear warm-up from lr/10 to ``lr``
over the first 30% of the steps, then an exponential decay to lr/100 at the last step -- with Adam. The CPU default
mixes a random subset of the training data (``train`` inputs) with the test cases instead of the full training
set; the report names what ran. The model under audit is never changed: a deep copy is trained.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Dict, Optional

import numpy as np
import torch
import torch.nn.functional as F


def slow_start_fast_decay(step: int, total: int, lr: float, warmup: float = 0.3) -> float:
    """The learning rate at ``step`` of ``total``: warm-up from lr/10 to lr, then exponential decay to lr/100."""
    w = max(1, int(round(warmup * total)))
    if step < w:
        return lr * (0.1 + 0.9 * step / w)
    frac = (step - w) / max(1, total - 1 - w)
    return lr * math.exp(math.log(0.01) * min(1.0, frac))


def finetune(
    module: torch.nn.Module,
    X: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int = 10,
    lr: float = 1e-3,
    batch_size: int = 64,
    seed: int = 0,
    device: Any = "cpu",
    progress: Optional[Any] = None,
) -> Dict[str, Any]:
    """Fine-tune a deep copy of ``module`` on ``(X, y)``; returns ``{"module", "history"}``."""
    m = copy.deepcopy(module).to(device)
    g = torch.Generator().manual_seed(int(seed))
    Xt = torch.as_tensor(np.asarray(X, np.float32))
    yt = torch.as_tensor(np.asarray(y, np.int64))
    n = len(Xt)
    per = max(1, math.ceil(n / batch_size))
    total = per * int(epochs)
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    history = []
    step = 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        for ep in range(int(epochs)):
            m.train()
            perm = torch.randperm(n, generator=g)
            tot = 0.0
            for b in range(per):
                idx = perm[b * batch_size : (b + 1) * batch_size]
                for grp in opt.param_groups:
                    grp["lr"] = slow_start_fast_decay(step, total, lr)
                loss = F.cross_entropy(m(Xt[idx].to(device)), yt[idx].to(device))
                opt.zero_grad()
                loss.backward()
                opt.step()
                tot += float(loss.detach()) * len(idx)
                step += 1
            history.append({"epoch": ep + 1, "loss": tot / n})
            if progress is not None:
                progress("fine-tuning (epochs)", ep + 1, int(epochs))
    m.eval()
    return {"module": m, "history": history}
