"""A TorchScript module as the methods use a torch module: :class:`ScriptedModule`, whose deep copy is a fresh load.

Caveat first: ``copy.deepcopy`` of a ``torch.jit.ScriptModule`` gives parameters that are not leaves (each a clone of
the original's), which no optimiser takes ("can't optimize a non-leaf Tensor"), and the methods that fine-tune or
defend a copy of the audited model (intrinsic robustness, HDA's repair) deep-copy it. Wrapped, a copy is the module
saved and loaded again: the same program and weights, with parameters of its own.
"""

from __future__ import annotations

import io
from typing import Any, Dict, Optional

import torch


class ScriptedModule(torch.nn.Module):
    """A ``torch.jit.ScriptModule`` as a plain module: ``forward`` is the script's, gradients flow, and a deep copy
    is the script saved and loaded again (on the device of its parameters).

    Examples
    --------
    >>> import copy, torch
    >>> m = ScriptedModule(torch.jit.script(torch.nn.Linear(2, 2)))
    >>> all(p.is_leaf for p in copy.deepcopy(m).parameters())
    True
    """

    def __init__(self, script: Any):
        super().__init__()
        self.script = script

    def forward(self, x: torch.Tensor) -> Any:
        return self.script(x)

    def __deepcopy__(self, memo: Optional[Dict[int, Any]] = None) -> "ScriptedModule":
        buf = io.BytesIO()
        torch.jit.save(self.script, buf)
        buf.seek(0)
        first = next(iter(self.script.parameters()), None)
        where = first.device if first is not None else torch.device("cpu")
        twin = ScriptedModule(torch.jit.load(buf, map_location=where))
        for mine, theirs in zip(self.script.parameters(), twin.script.parameters()):
            theirs.requires_grad_(mine.requires_grad)
        return twin.train(self.training)
