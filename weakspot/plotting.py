"""What every method's figures share: pyplot on a file back end, and an input image as matplotlib shows it.

Caveat first: figures are drawn without a display (the Agg back end, unless one was chosen before); a figure is
returned to the caller, who saves it (the pipeline writes PNGs atomically) and closes it.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def pyplot() -> Any:
    """``matplotlib.pyplot``, on the Agg back end unless one was already chosen."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def display_array(image: Any) -> np.ndarray:
    """An input image as matplotlib shows it: ``(C, H, W)`` in [0, 1] -> ``(H, W)`` (grey) or ``(H, W, 3)``, clipped."""
    a = np.asarray(image, np.float64)
    if a.ndim == 3:
        a = np.moveaxis(a, 0, -1)
        if a.shape[-1] == 1:
            a = a[..., 0]
    return np.clip(a, 0, 1)


def show_image(ax: Any, image: Any, title: str = "", **title_kw: Any) -> None:
    """Draw one input image on ``ax`` (grey-scale when it has one channel), without axes."""
    a = display_array(image)
    ax.imshow(a, cmap="gray" if a.ndim == 2 else None, vmin=0, vmax=1)
    ax.set_axis_off()
    if title:
        ax.set_title(title, **title_kw)


def pairs_figure(rows: Sequence[Any], *, titles: Sequence[str] = ("input", "test case"), size: float = 1.6) -> Any:
    """A grid of (input, generated) image pairs, one pair per row item ``(x, x_new, caption)``: what an input became."""
    plt = pyplot()
    n = max(1, len(rows))
    fig, axes = plt.subplots(n, 2, figsize=(2 * size, n * size), squeeze=False)
    for i, (x, x_new, caption) in enumerate(rows):
        show_image(axes[i, 0], x, titles[0] if i == 0 else "", fontsize=8)
        show_image(axes[i, 1], x_new, caption, fontsize=7)
    fig.tight_layout()
    return fig
