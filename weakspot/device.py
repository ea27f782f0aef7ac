"""One ``device`` setting (auto|cpu|cuda) for every torch computation and Blender's Cycles, and the number of CPU
threads they use."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

from weakspot.errors import ConfigError

if TYPE_CHECKING:
    import torch

VALID_DEVICES = ("auto", "cpu", "cuda")

#: CPU threads of every torch, BLAS and OpenMP computation of a pipeline stage, unless params.yaml's ``threads`` says
#: otherwise. Pinned, not the machine's core count: a sum split over 1 thread or 2 rounds differently (measured: the
#: scenes model's test accuracy 0.782 with 2 threads, 0.786 with 1), so the same audit gives the same bytes on a
#: 2-core laptop and a 16-core agent, and two stages side by side on 2 cores do not fight over them.
DEFAULT_THREADS = 1


def valid_threads(value: object) -> bool:
    """Whether ``value`` is a thread count params.yaml may give: a whole number, 1 or more (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def resolve_device(device: str = "auto") -> "torch.device":
    """Map ``auto|cpu|cuda`` (or ``cuda:N``) to a ``torch.device``; ``auto`` is CUDA when present."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ConfigError(f"device: {device!r} was asked for but no CUDA device is available; use 'auto' or 'cpu'")
        return torch.device(device)
    raise ConfigError(f"device: {device!r} is not valid; allowed: {', '.join(VALID_DEVICES)}")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch, and ask torch for deterministic kernels."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)


@contextlib.contextmanager
def single_thread(device) -> Iterator[None]:
    """Run small-network CPU work on one intra-op thread, then restore the thread count.

    Tiny ops gain nothing from splitting, and extra intra-op threads spin-wait against other work (measured here:
    an LSTM policy step 20x slower on a loaded 2-core machine). Results do not depend on it. No-op off the CPU.
    """
    import torch

    if getattr(device, "type", str(device)) != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
