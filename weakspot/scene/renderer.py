"""Renderers: ``render(list of scene params) -> uint8 images (n, H, W, 3)``; the real one is Blender Cycles.

Caveats first:

* Only the stages that render (render, examine, examine_study) load this module: the scene's params model, factor
  space, objects and data set do not import it, so a change here reruns those stages alone.
* :class:`BlenderRenderer` renders in worker processes (``workers >= 1``, :mod:`weakspot.scene.pool`: one Blender per
  process, started once, a crashed worker replaced) or in this process (``workers = 0``); the scene itself is
  :mod:`weakspot.scene.blender` (``bpy`` imported lazily, a missing bpy is a :class:`~weakspot.errors.RenderError`)
  and the camera's pose :mod:`weakspot.scene.camera`. Nothing is left behind: every temporary folder is removed on
  :meth:`BlenderRenderer.close`.
* Deterministic: the same params and seed give the same pixels whichever worker (and however many threads) renders
  them (checked in ``tests/scene/test_renderer.py``).
* The object is composited onto a constant ``background`` grey, so the alpha channel is an exact foreground mask
  (``render(..., return_alpha=True)``).

A scene params dict holds the 12 factors of :class:`~weakspot.scene.space.SceneSpace` plus ``"class"`` (a name in
:data:`~weakspot.scene.objects.OBJECTS`) and ``"instance"`` (an int id).

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Sec. 4.1 (images rendered with Blender from 12 factors, Table 1).

Example
-------
>>> from weakspot.scene.renderer import BlenderRenderer
>>> from weakspot.scene.space import SceneSpace
>>> import numpy as np
>>> space = SceneSpace()
>>> p = dict(space.sample(np.random.default_rng(0), 1)[0], **{"class": "mug", "instance": 0})
>>> with BlenderRenderer(resolution=32, samples=4, workers=0) as r:  # doctest: +SKIP
...     r.render([p]).shape
(1, 32, 32, 3)
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

import numpy as np

from weakspot.errors import ConfigError, RenderError
from weakspot.registry import Registry
from weakspot.scene.blender import BACKGROUND, BlenderScene
from weakspot.scene.objects import OBJECTS
from weakspot.scene.pool import WorkerPool
from weakspot.scene.space import SceneSpace

RENDERERS = Registry("renderer")


@runtime_checkable
class Renderer(Protocol):
    """What an examiner renders with: a batch of scene params in, uint8 RGB images (n, H, W, 3) out."""

    resolution: int

    def render(self, params: Sequence[Mapping[str, Any]]) -> np.ndarray:  # pragma: no cover - protocol
        ...


def check_scene_params(params: Sequence[Mapping[str, Any]], space: Optional[SceneSpace] = None) -> None:
    """Raise ConfigError (naming the item, key, value and what is allowed) for a malformed batch of scene params.

    Factors are checked against the physical limits of ``space`` (default: the widest sensible bounds, so a
    training set drawn from a narrower space passes); ``class`` must be a registered object class and ``instance``
    a non-negative int.
    """
    if isinstance(params, Mapping) or not isinstance(params, Sequence):
        raise ConfigError(f"render: expected a list of scene-param dicts, got {type(params).__name__}")
    space = space or _WIDE_SPACE
    for i, p in enumerate(params):
        if not isinstance(p, Mapping):
            raise ConfigError(f"render: item {i} is a {type(p).__name__}, expected a dict of scene params")
        for key in ("class", "instance"):
            if key not in p:
                raise ConfigError(f"render: item {i} lacks {key!r} (need the 12 factors plus 'class' and 'instance')")
        if p["class"] not in OBJECTS:
            raise ConfigError(f"render: item {i}: unknown class {p['class']!r}; valid classes: {', '.join(OBJECTS)}")
        inst = p["instance"]
        if isinstance(inst, bool) or not isinstance(inst, (int, np.integer)) or inst < 0:
            raise ConfigError(f"render: item {i}: 'instance' must be a non-negative int, got {inst!r}")
        try:
            space.validate(p)
        except ConfigError as e:
            raise ConfigError(f"render: item {i}: {e}") from None


# a space wide enough for any sensible override (distances up to 10x the defaults, full angle ranges)
_WIDE_SPACE = SceneSpace(
    {
        "sun_alpha": (-100.0, 100.0),
        "sun_beta": (-100.0, 100.0),
        "sun_zeta": (-100.0, 100.0),
        "sun_energy": (0.0, 1000.0),
        "light_energy": (0.0, 1e6),
        "light_distance": (0.71, 1000.0),
        "light_azimuth": (-3600.0, 3600.0),
        "view_distance": (0.71, 100.0),
        "view_azimuth": (-3600.0, 3600.0),
        "view_roll": (-3600.0, 3600.0),
    }
)


@RENDERERS.register("blender")
class BlenderRenderer:
    """Blender Cycles renderer with a pool of worker processes and a batch API.

    Parameters
    ----------
    resolution : int, default 64
        Square image side in pixels. (The paper does not state its resolution; the default CPU profile uses 32.)
    samples : int, default 8
        Cycles samples per pixel (denoiser off: it would cost 15x the render). At 32 px and 8 samples a frame takes
        about 7-25 ms of one core here, depending on the machine's load (``benchmarks/bench_render.py``).
    workers : int, default 2
        Worker processes, one Blender each (spawned once, on first use); ``0`` renders in this process.
    device : {"auto", "cpu", "cuda"}, default "auto"
        Cycles on the GPU (OptiX, else CUDA) when the device resolves to CUDA and Cycles sees one, else the CPU.
    seed : int, default 0
        Cycles' sampling seed: the same params and seed give the same pixels, whichever worker renders them.
    background : (float, float, float), default (0.5, 0.5, 0.5)
        Background grey (display values in [0, 1]) the object is composited onto.
    threads : int, optional
        Cycles threads per worker; default ``cpu_count // max(workers, 1)``.
    timeout : float, default 600
        Seconds to wait for a worker to start or answer a batch before raising RenderError.
    cache_size : int, default 256
        Meshes kept per worker (least recently used are dropped).
    max_retries : int, default 2
        How many times one chunk of a batch is given to a fresh worker after the worker rendering it died (a crash,
        not a Python exception); ``0`` makes any dead worker a RenderError. Each restart costs a Blender start-up
        (a few seconds).

    Attributes
    ----------
    device_used_ : str
        Where Cycles renders: ``"cpu"``, ``"gpu:optix"`` or ``"gpu:cuda"``.
    tmp_dirs_ : list of str
        The workers' private temporary folders (removed on :meth:`close`).
    restarts_ : int
        Workers restarted after a crash since this renderer was made.

    Example
    -------
    >>> with BlenderRenderer(resolution=32, samples=4, workers=2) as r:  # doctest: +SKIP
    ...     images = r.render(params)          # (n, 32, 32, 3) uint8
    ...     images, alpha = r.render(params, return_alpha=True)
    """

    def __init__(
        self,
        *,
        resolution: int = 64,
        samples: int = 8,
        workers: int = 2,
        device: str = "auto",
        seed: int = 0,
        background: Tuple[float, float, float] = BACKGROUND,
        threads: Optional[int] = None,
        timeout: float = 600.0,
        cache_size: int = 256,
        max_retries: int = 2,
    ):
        self.resolution = resolution
        self.samples = samples
        self.workers = workers
        self.device = device
        self.seed = seed
        self.background = background
        self.threads = threads
        self.timeout = timeout
        self.cache_size = cache_size
        self.max_retries = max_retries
        self._local: Optional[BlenderScene] = None
        self._local_dirs: List[str] = []
        self._pool: Optional[WorkerPool] = None
        self._started = False
        self._closed = False
        self.device_used_: Optional[str] = None

    @property
    def tmp_dirs_(self) -> List[str]:
        """The private temporary folders of the workers (or of the in-process scene)."""
        return self._pool.tmp_dirs if self._pool is not None else self._local_dirs

    @property
    def restarts_(self) -> int:
        """Workers restarted after a crash since this renderer was made."""
        return self._pool.restarts if self._pool is not None else 0

    # -- life cycle ----------------------------------------------------------------------------------------------
    def _check(self) -> None:
        def bad(name, value, allowed):
            raise ConfigError(f"BlenderRenderer: {name}={value!r} is not valid; allowed: {allowed}")

        res = self.resolution
        if isinstance(res, bool) or not isinstance(res, int) or not 8 <= res <= 4096:
            bad("resolution", self.resolution, "an int in [8, 4096]")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or not 1 <= self.samples <= 65536:
            bad("samples", self.samples, "an int in [1, 65536]")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or not 0 <= self.workers <= 256:
            bad("workers", self.workers, "an int in [0, 256] (0 renders in this process)")
        if self.device not in ("auto", "cpu", "cuda"):
            bad("device", self.device, "auto, cpu, cuda")
        if len(self.background) != 3 or not all(0.0 <= float(v) <= 1.0 for v in self.background):
            bad("background", self.background, "three numbers in [0, 1]")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            bad("max_retries", self.max_retries, "a non-negative int")

    def _config(self) -> Dict[str, Any]:
        if self.device == "auto":
            try:
                from weakspot.device import resolve_device

                device = "cuda" if resolve_device("auto").type == "cuda" else "cpu"
                device = "auto" if device == "cuda" else "cpu"  # let Cycles fall back if it sees no GPU
            except ImportError:
                device = "auto"
        else:
            device = self.device
        n = max(self.workers, 1)
        threads = self.threads if self.threads is not None else max(1, (os.cpu_count() or 1) // n)
        return dict(
            resolution=self.resolution,
            samples=self.samples,
            device=device,
            seed=int(self.seed),
            threads=int(threads),
            background=tuple(float(v) for v in self.background),
            cache_size=int(self.cache_size),
        )

    def start(self) -> "BlenderRenderer":
        """Start the worker processes (or the in-process scene); called on first use. Returns self."""
        if self._closed or (self._pool is not None and self._pool.closed):
            raise RenderError("BlenderRenderer: this renderer was closed (or a worker died); make a new one")
        if self._started:
            return self
        self._check()
        config = self._config()
        if self.workers == 0:
            self._local = BlenderScene(**config)
            self.device_used_ = self._local.device_used
            self._local_dirs = [self._local.tmp_dir]
        else:
            self._pool = WorkerPool(config, self.workers, timeout=self.timeout, max_retries=self.max_retries)
            self.device_used_ = self._pool.start().device_used
        self._started = True
        return self

    def close(self) -> None:
        """Stop the workers and delete the temporary folders. Safe to call twice."""
        if self._local is not None:
            self._local.close()
            self._local = None
        if self._pool is not None:
            self._pool.close()
        self._closed = True

    def __enter__(self) -> "BlenderRenderer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()

    # -- rendering -----------------------------------------------------------------------------------------------
    def render(
        self, params: Sequence[Mapping[str, Any]], *, return_alpha: bool = False
    ) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
        """Render a batch of scenes.

        Parameters
        ----------
        params : list of dict
            Each holds the 12 factors of :class:`SceneSpace` (Blender units) plus ``"class"`` and ``"instance"``.
        return_alpha : bool, default False
            Also return the foreground coverage (n, H, W) uint8 (255 = object).

        Returns
        -------
        images : (n, H, W, 3) uint8, in the order of ``params``
        """
        if isinstance(params, Mapping) or isinstance(params, (str, bytes)):
            raise ConfigError(f"render: expected a list of scene-param dicts, got a {type(params).__name__}")
        params = list(params)
        check_scene_params(params)
        self.start()
        n = len(params)
        if n == 0:
            rgba = np.empty((0, self.resolution, self.resolution, 4), np.uint8)
        elif self._local is not None:
            rgba = self._local.render(params)
        else:
            assert self._pool is not None  # start() made a local scene or a pool
            try:
                rgba = self._pool.render(params)
            except BaseException:  # an interrupt would leave answers in the pipes for the next batch to misread
                self._pool.close()
                raise
        if return_alpha:
            return np.ascontiguousarray(rgba[..., :3]), np.ascontiguousarray(rgba[..., 3])
        return np.ascontiguousarray(rgba[..., :3])


def renderer_for(settings: Any, device: str = "auto") -> "BlenderRenderer":
    """A :class:`BlenderRenderer` with a scene section's settings (a :class:`~weakspot.scene.config.SceneParams`),
    not yet started."""
    return BlenderRenderer(
        resolution=settings.resolution,
        samples=settings.samples,
        workers=settings.workers,
        device=device,
        seed=settings.seed,
    )
