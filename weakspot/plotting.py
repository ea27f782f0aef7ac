"""What every method's figures share: pyplot on a file back end, and an input image as matplotlib shows it.

Caveat first: figures are drawn without a display (the Agg back end, unless one was chosen before); a figure is
returned to the caller, who saves it (the pipeline writes PNGs atomically) and closes it.
"""

from __future__ import annotations

from typing import Any, Sequence, Tuple

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


def show_image(ax: Any, image: Any, title: str = "", *, frame: bool = False, **title_kw: Any) -> None:
    """Draw one input image on ``ax`` as the model sees it (pixels as squares, grey-scale for one channel), without
    ticks; ``frame`` keeps the axes' frame (and so room for a row label: ``ax.set_ylabel``)."""
    a = display_array(image)
    ax.imshow(a, cmap="gray" if a.ndim == 2 else None, vmin=0, vmax=1, interpolation="nearest")
    if frame:
        ax.set_xticks([])
        ax.set_yticks([])
    else:
        ax.set_axis_off()
    if title:
        ax.set_title(title, **title_kw)


Panel = Tuple[Any, str, bool]
"""One image of :func:`pairs_across`: ``(image, caption, flagged)``; a flagged caption is drawn in red."""


def pairs_across(
    columns: Sequence[Tuple[Panel, Panel]],
    *,
    row_labels: Tuple[str, str] = ("input", "test case"),
    width: float = 1.25,
    fontsize: int = 8,
    empty: str = "nothing found",
) -> Any:
    """Inputs (top row) over what a method made of them (bottom row), one pair per column, each image captioned:
    the worst neighbour of an input, the natural AE of a seed. ``empty``: the text of a figure with no pair."""
    plt = pyplot()
    n = max(1, len(columns))
    fig, axes = plt.subplots(2, n, figsize=(width * n + 0.6, 3.6), squeeze=False)
    if not columns:
        for ax in axes.ravel():
            ax.axis("off")
        axes[0, 0].text(0, 0.5, empty, fontsize=9)
        return fig
    for c, pair in enumerate(columns):
        for r, (image, caption, flagged) in enumerate(pair):
            show_image(
                axes[r, c], image, caption, frame=True, fontsize=fontsize, color="crimson" if flagged else "black"
            )
    axes[0, 0].set_ylabel(row_labels[0], fontsize=8)
    axes[1, 0].set_ylabel(row_labels[1], fontsize=8)
    fig.tight_layout()
    return fig
