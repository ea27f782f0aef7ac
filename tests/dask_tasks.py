"""Cached Prefect tasks and flows for tests/test_dask.py, in a module of their own so that the Dask worker processes
import them by name (the test module's path is on every worker's sys.path: spawned workers copy it)."""

from __future__ import annotations

import os
from pathlib import Path

from distributed.diagnostics.plugin import SchedulerPlugin
from prefect import flow

from tasks.common import cached_task, fan_out


@cached_task
def draw(seed: int, n: int) -> dict:
    """A seeded torch computation (a few SGD steps of a tiny model on random data), its result and where it ran."""
    import torch

    torch.manual_seed(seed)
    X, y = torch.randn(n, 8), torch.randn(n, 1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(20):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), y)
        loss.backward()
        opt.step()
    # a long reduction: split over 1 thread or 2 it rounds differently, so this catches workers whose torch runs on
    # another thread count than the sequential run's
    checksum = (torch.randn(64, 20000) @ torch.randn(20000, 32)).sum().item()
    return {
        "loss": loss.item(),
        "checksum": checksum,
        "weights": model[0].weight.detach().flatten()[:5].tolist(),
        "pid": os.getpid(),
    }


@flow(name="dask-test-draws")
def draws(seeds: list) -> list:
    return fan_out(draw, [((s, 64), {}) for s in seeds], labels=[f"seed {s}" for s in seeds])


@cached_task
def dies_once(marker: str) -> int:
    """Kills its worker process the first time (no marker file yet), answers 42 the second."""
    m = Path(marker)
    if not m.exists():
        m.write_text(str(os.getpid()))
        os._exit(1)
    return 42


@cached_task
def always_dies(marker: str) -> int:
    """Kills its worker process every time, a moment after it started (long enough for Prefect to hear that the run
    is Running); counts the attempts in the marker file."""
    import time

    m = Path(marker)
    m.write_text(str(int(m.read_text()) + 1 if m.exists() else 1))
    time.sleep(2)
    os._exit(1)


@flow(name="dask-test-crash")
def crash(marker: str, always: bool = False) -> list:
    return fan_out(always_dies if always else dies_once, [((marker,), {})], labels=["the crashing one"])


class Restrictions(SchedulerPlugin):
    """A Dask scheduler plugin (added to an in-process scheduler) that records the resources each task asked for."""

    name = "weakspot-test-restrictions"

    def __init__(self, scheduler):
        self.scheduler, self.seen = scheduler, {}

    def transition(self, key, start, finish, *args, **kwargs):
        ts = self.scheduler.tasks.get(key)
        if ts is not None and finish == "processing":
            self.seen[str(key)] = dict(ts.resource_restrictions or {})
