"""Fig. 6 of seeds/002 (Sec. 5.5): how much psi moves between random batches of the same size.

Caveats first: the batches are drawn (without replacement) from the per-input KL divergences of one finite pool, not
from the data's distribution, so their spread is smaller by the finite-population factor sqrt((N - b) / (N - 1));
``relative_std`` is corrected for it, ``relative_std_in_pool`` is the raw value. A batch size not smaller than the
pool is left out (it would be the pool itself). Deterministic for the same seed.

Example
-------
>>> import numpy as np
>>> t = stability_table(np.random.default_rng(0).lognormal(0, 1, 500), [50, 500], draws=10, seed=0)
>>> list(t["batch_size"]), bool(t["relative_std"].iloc[0] > t["relative_std_in_pool"].iloc[0])
([50], True)
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from weakspot.intrinsic.psi import psi

COLUMNS = [
    "batch_size",
    "draws",
    "psi_mean",
    "psi_std",
    "relative_std",
    "relative_std_in_pool",
    "max_relative_deviation",
]


def stability_table(kl_pool: np.ndarray, batch_sizes: Sequence[int], draws: int, seed: int) -> Any:
    """Fig. 6: psi of ``draws`` random batches (without replacement) of each size drawn from the per-input KLs of the
    pool; one row per batch size (a pandas DataFrame with :data:`COLUMNS`)."""
    import pandas as pd

    rng = np.random.default_rng([int(seed) % (2**32), 6])
    full = psi(kl_pool)
    rows = []
    for b in batch_sizes:
        N = len(kl_pool)
        if b >= N:
            continue
        vals = np.array([psi(kl_pool[rng.choice(N, size=b, replace=False)]) for _ in range(int(draws))])
        raw = float(vals.std(ddof=1) / vals.mean())
        fpc = float(np.sqrt((N - b) / (N - 1)))
        rows.append(
            {
                "batch_size": int(b),
                "draws": int(draws),
                "psi_mean": float(vals.mean()),
                "psi_std": float(vals.std(ddof=1)),
                "relative_std": raw / fpc,
                "relative_std_in_pool": raw,
                "max_relative_deviation": float(np.max(np.abs(vals - full)) / full),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
