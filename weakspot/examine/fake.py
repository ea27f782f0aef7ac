"""A fast, Blender-free stand-in renderer with a planted weakness, for tests and dry runs of the examine stages.

Caveats first: it draws flat 2-D silhouettes, not 3-D objects; it exists so that examiners and experiments can be
tested in seconds with a *known* answer. Its weak spot by construction: the silhouette is foreshortened by
``|cos(view_elevation)|``, so views from the top or bottom (|elevation| near 90 degrees) squash every class to the
same thin bar, and a dim scene (low sun and light energy) lowers the contrast.

It follows the renderer contract of ``weakspot.scene``: ``render(list of dicts) -> uint8 (n, H, W, 3)``, each dict
holding the factors plus ``"class"`` and ``"instance"``; deterministic for the same params and seed; batched
(one vectorised draw for all scenes).

Example
-------
>>> r = FakeRenderer(classes=["disc", "square"], resolution=16)
>>> img = r.render([{"class": "disc", "instance": 0, "view_elevation": 0.0}])
>>> img.shape, img.dtype.name
((1, 16, 16, 3), 'uint8')
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence

import numpy as np

from weakspot.errors import ConfigError, RenderError

#: Silhouettes, in local coordinates (x, y) in [-1, 1]; class i draws shape i mod 5.
SHAPES = ("disc", "square", "triangle", "cross", "ring")

#: Neutral values for factors a scene dict leaves out (mid-range of the scene space's defaults).
_NEUTRAL: Dict[str, float] = {
    "sun_energy": 3.0,
    "light_energy": 650.0,
    "light_distance": 14.0,
    "light_azimuth": 0.0,
    "light_elevation": 0.0,
    "view_distance": 2.3,
    "view_azimuth": 90.0,
    "view_elevation": 0.0,
    "view_roll": 0.0,
    "sun_alpha": 0.0,
    "sun_beta": 0.0,
    "sun_zeta": 0.0,
}


class FakeRenderer:
    """Vectorised silhouette renderer with a planted elevation weakness (see module docstring).

    Parameters
    ----------
    classes : list of str
        Class names; class ``i`` is drawn as ``SHAPES[i % 5]``.
    resolution : int, default 32
    seed : int, default 0
        Seeds the per-instance proportions and the pixel noise (noise is a function of the scene, so the same scene
        renders the same image).
    noise : float, default 6.0
        Pixel noise standard deviation (0..255 scale).
    """

    def __init__(self, *, classes: Sequence[str], resolution: int = 32, seed: int = 0, noise: float = 6.0):
        if len(classes) < 1:
            raise ConfigError("classes: need at least one class name")
        if resolution < 8:
            raise ConfigError(f"resolution: need >= 8 pixels, got {resolution}")
        self.classes = list(classes)
        self.resolution = int(resolution)
        self.seed = int(seed)
        self.noise = float(noise)
        self.calls = 0
        self.n_rendered = 0

    def __enter__(self) -> "FakeRenderer":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def _col(self, scenes: Sequence[Mapping], key: str) -> np.ndarray:
        return np.array([float(s.get(key, _NEUTRAL[key])) for s in scenes])

    def render(self, scenes: Sequence[Mapping]) -> np.ndarray:
        """Render ``scenes`` (dicts of factors plus ``class`` and ``instance``) to uint8 ``(n, H, W, 3)``."""
        n, H = len(scenes), self.resolution
        self.calls += 1
        self.n_rendered += n
        if n == 0:
            return np.zeros((0, H, H, 3), np.uint8)
        try:
            cls = np.array([self.classes.index(s["class"]) for s in scenes])
            inst = np.array([int(s.get("instance", 0)) for s in scenes])
        except (KeyError, ValueError) as e:
            raise RenderError(f"render: each scene needs a 'class' among {self.classes}: {e}") from None
        shape = cls % len(SHAPES)
        # per-instance proportions (deterministic)
        aspect = 0.85 + 0.3 * ((inst * 7919 + cls * 104729 + self.seed) % 97) / 96.0
        dist = self._col(scenes, "view_distance")
        size = np.clip(0.75 * 2.3 / np.maximum(dist, 0.5), 0.2, 1.2)
        rot = np.deg2rad(self._col(scenes, "view_roll") + 0.5 * self._col(scenes, "view_azimuth"))
        squash = np.maximum(np.abs(np.cos(np.deg2rad(self._col(scenes, "view_elevation")))), 0.06)
        bright = (
            0.35
            + 0.45 * np.clip(self._col(scenes, "sun_energy") / 5.0, 0, 1)
            + 0.2 * np.clip((self._col(scenes, "light_energy") - 300.0) / 700.0, 0, 1)
        )
        g = (np.arange(H) + 0.5) / H * 2 - 1
        X, Y = np.meshgrid(g, g)  # (H, W)
        c, s = np.cos(rot)[:, None, None], np.sin(rot)[:, None, None]
        x = (c * X + s * Y) / (size * aspect)[:, None, None]
        y = (-s * X + c * Y) / (size * squash)[:, None, None]
        r = np.sqrt(x**2 + y**2)
        masks = np.stack(
            [
                r < 0.8,
                np.maximum(np.abs(x), np.abs(y)) < 0.65,
                (y > -0.6) & (np.abs(x) < (0.7 - y) * 0.55) & (y < 0.75),
                ((np.abs(x) < 0.22) | (np.abs(y) < 0.22)) & (np.maximum(np.abs(x), np.abs(y)) < 0.8),
                (r < 0.8) & (r > 0.45),
            ]
        )  # (5, n, H, W)
        m = masks[shape, np.arange(n)]  # (n, H, W)
        fg = 255.0 * bright[:, None, None]
        bg = 60.0
        img = np.where(m, fg, bg)
        # scene-keyed noise: the same scene always gets the same noise
        key = np.abs(np.round(np.stack([self._col(scenes, k) for k in sorted(_NEUTRAL)], 1) * 1000).astype(np.int64))
        h = (key * np.arange(1, key.shape[1] + 1)).sum(1) + inst * 31 + cls * 131 + self.seed
        noise = np.stack([np.random.default_rng(int(v) % (2**63)).standard_normal((H, H)) for v in h])
        img = np.clip(img + self.noise * noise, 0, 255)
        return np.repeat(img[..., None], 3, axis=-1).astype(np.uint8)


def fake_dataset(
    renderer: FakeRenderer,
    space,
    *,
    instances_per_class: int = 6,
    views_per_instance: int = 10,
    val_instances: int = 2,
    seed: int = 0,
):
    """Render a small labelled data set like ``weakspot.scene.dataset.render_dataset`` does (same columns:
    class, label, instance, split and the 12 factors). The last ``val_instances`` of each class are validation."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows: List[dict] = []
    for label, cls in enumerate(renderer.classes):
        for inst in range(instances_per_class):
            split = "validation" if inst >= instances_per_class - val_instances else "train"
            for p in space.sample(rng, views_per_instance):
                rows.append({"class": cls, "label": label, "instance": inst, "split": split, **p})
    images = renderer.render(rows)
    return images, pd.DataFrame(rows)
