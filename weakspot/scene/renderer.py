"""Renderers: ``render(list of scene params) -> uint8 images (n, H, W, 3)``; the real one is Blender Cycles.

Caveats first:

* ``bpy`` (Blender as a Python module, 5.0) runs headless and only with Cycles (EEVEE needs a display). It is
  imported lazily, in worker processes (``workers >= 1``, "spawn" context, one Blender per process, started once)
  or in this process (``workers = 0``). A missing bpy is a :class:`~weakspot.errors.RenderError`.
* A worker that dies while it holds a chunk (a segfault in Blender, the out-of-memory killer, SIGKILL) is replaced
  by a fresh one and that chunk alone is rendered again, at most ``max_retries`` times per chunk (renders are
  deterministic, so the pixels are those of an uncrashed run); each restart is logged as a warning and counted in
  ``restarts_``. Past that, or when a worker raises a Python exception (not a crash: rendering again would fail
  again), or does not answer within ``timeout``, it is a :class:`~weakspot.errors.RenderError` and the renderer is
  closed. A worker that dies while starting is not restarted either.
* Cycles writes its result to a PNG in a private temporary folder, which is read back and removed at once; the
  folder is deleted on :meth:`BlenderRenderer.close` (the in-memory Viewer-node route does not work headless in
  Blender 5.0). Nothing is left behind.
* Deterministic: Cycles' sampling seed is ``seed`` and every pixel's sample sequence depends only on the seed and
  the pixel, so the same params and seed give the same pixels whichever worker (and however many threads) renders
  them (checked in ``tests/scene/test_renderer.py``).
* The object is rendered over a transparent film (the world still lights it as a constant ambient light) and then
  composited onto a constant ``background`` grey, so the alpha channel is an exact foreground mask
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

import atexit
import contextlib
import logging
import math
import multiprocessing as mp
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

import numpy as np

from weakspot.errors import ConfigError, RenderError
from weakspot.registry import Registry
from weakspot.scene.objects import OBJECTS, build_object
from weakspot.scene.space import SceneSpace

RENDERERS = Registry("renderer")
logger = logging.getLogger(__name__)

#: Fault injection for the tests (read by the worker processes): ``kill`` makes every worker SIGKILL itself after
#: the first scene of each chunk, ``kill-once:<path>`` only the first worker to create the file ``<path>``, and
#: ``raise`` makes a worker raise a Python exception instead of rendering.
_FAULT_ENV = "WEAKSPOT_RENDER_FAULT"

#: Camera lens: Blender's default 50 mm on a 36 mm sensor (39.6 degrees field of view).
LENS_MM = 50.0
SENSOR_MM = 36.0
#: Constant world (ambient) light strength, so that a scene with the sun off still shows the object.
AMBIENT = 0.5
#: The render's background grey (display values in [0, 1]).
BACKGROUND = (0.5, 0.5, 0.5)


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
_WIDE_SPACE = SceneSpace({"sun_alpha": (-100.0, 100.0), "sun_beta": (-100.0, 100.0), "sun_zeta": (-100.0, 100.0),
                          "sun_energy": (0.0, 1000.0), "light_energy": (0.0, 1e6), "light_distance": (0.71, 1000.0),
                          "light_azimuth": (-3600.0, 3600.0), "view_distance": (0.71, 100.0),
                          "view_azimuth": (-3600.0, 3600.0), "view_roll": (-3600.0, 3600.0)})


# ---------------------------------------------------------------------------------------------------------------
# the Blender side: one scene per process
# ---------------------------------------------------------------------------------------------------------------


def camera_matrix(distance: float, azimuth_deg: float, elevation_deg: float, roll_deg: float) -> np.ndarray:
    """4x4 world matrix of a camera on a sphere around the origin, looking at it, rolled about its view axis.

    The camera's up vector is the direction of increasing elevation, which is defined (and continuous) everywhere,
    including straight above and below (elevation +-90 degrees), where a world-up "look-at" would be singular.
    """
    az, el, roll = np.radians([azimuth_deg, elevation_deg, roll_deg])
    z = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])  # camera looks along -z
    y = np.array([-math.sin(el) * math.cos(az), -math.sin(el) * math.sin(az), math.cos(el)])
    x = np.cross(y, z)
    xr = math.cos(roll) * x + math.sin(roll) * y
    yr = -math.sin(roll) * x + math.cos(roll) * y
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = xr, yr, z, distance * z
    return m


def spherical(distance: float, azimuth_deg: float, elevation_deg: float) -> Tuple[float, float, float]:
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    return (distance * math.cos(el) * math.cos(az), distance * math.cos(el) * math.sin(az), distance * math.sin(el))


@contextlib.contextmanager
def _quiet_stdout():
    """Silence Blender's per-frame chatter on file descriptor 1 (it bypasses sys.stdout)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # pragma: no cover - no real fd 1
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


class _BlenderScene:
    """The scene (camera, sun, point light, ambient world, one object slot), built once; objects swapped per render."""

    _count = 0

    def __init__(self, *, resolution: int, samples: int, device: str, seed: int, threads: int,
                 background: Tuple[float, float, float], cache_size: int = 256):
        try:
            import bpy  # noqa: F401
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise RenderError(f"bpy (Blender as a Python module) is not importable: {e}; install bpy==5.0.1 "
                              "(Python 3.11 only)") from None
        self.resolution = resolution
        self.background = np.asarray(background, dtype=np.float32)
        self.cache_size = cache_size
        self._cache: "OrderedDict[Tuple[str, int], Any]" = OrderedDict()
        self._tmp = tempfile.mkdtemp(prefix="weakspot-render-")
        atexit.register(shutil.rmtree, self._tmp, True)  # also when a renderer is never closed
        self._path = os.path.join(self._tmp, "frame.png")
        self.device_used = self._build(resolution, samples, device, seed, threads)

    # -- set-up ----------------------------------------------------------------------------------------------------
    def _build(self, resolution, samples, device, seed, threads) -> str:
        import bpy

        # our own scene (and uniquely named data), so several in-process renderers can live side by side
        _BlenderScene._count += 1
        pre = self._prefix = f"weakspot{os.getpid()}-{_BlenderScene._count}-"
        sc = bpy.data.scenes.new(pre + "scene")
        r = sc.render
        r.engine = "CYCLES"
        r.resolution_x = r.resolution_y = resolution
        r.resolution_percentage = 100
        r.film_transparent = True
        r.use_persistent_data = True
        r.threads_mode = "FIXED" if threads > 0 else "AUTO"
        if threads > 0:
            r.threads = threads
        r.filepath = self._path
        r.image_settings.file_format = "PNG"
        r.image_settings.color_mode = "RGBA"
        r.image_settings.color_depth = "8"
        r.image_settings.compression = 0
        sc.view_settings.view_transform = "AgX"
        sc.view_settings.look = "None"
        c = sc.cycles
        c.samples = samples
        c.use_adaptive_sampling = False
        c.use_denoising = False  # OIDN costs about 0.35 s a frame here (measured), 15x a whole 32 px render
        c.seed = seed
        c.use_animated_seed = False
        c.max_bounces = 2
        c.diffuse_bounces = 1
        c.glossy_bounces = 1
        c.transmission_bounces = 0
        c.volume_bounces = 0
        c.transparent_max_bounces = 0
        c.caustics_reflective = c.caustics_refractive = False
        c.sample_clamp_indirect = 5.0
        c.filter_width = 1.5
        c.use_light_tree = False  # two lights: the light tree only costs a rebuild per frame
        c.use_auto_tile = False  # a 32-64 px frame is one tile anyway; auto-tiling adds per-frame overhead
        device_used = self._set_device(device, sc)

        world = bpy.data.worlds.new(pre + "ambient")
        sc.world = world
        world.use_nodes = True
        bg = world.node_tree.nodes.get("Background")
        bg.inputs["Color"].default_value = (1.0, 1.0, 1.0, 1.0)
        bg.inputs["Strength"].default_value = AMBIENT

        cam_data = bpy.data.cameras.new(pre + "camera")
        cam_data.lens, cam_data.sensor_width, cam_data.sensor_fit = LENS_MM, SENSOR_MM, "HORIZONTAL"
        cam_data.clip_start, cam_data.clip_end = 0.05, 100.0
        self.camera = bpy.data.objects.new(pre + "camera", cam_data)
        sc.collection.objects.link(self.camera)
        sc.camera = self.camera

        sun_data = bpy.data.lights.new(pre + "sun", "SUN")
        sun_data.angle = math.radians(2.0)
        self.sun = bpy.data.objects.new(pre + "sun", sun_data)
        self.sun.rotation_mode = "XYZ"
        sc.collection.objects.link(self.sun)

        pt_data = bpy.data.lights.new(pre + "point", "POINT")
        pt_data.shadow_soft_size = 0.25
        self.point = bpy.data.objects.new(pre + "point", pt_data)
        sc.collection.objects.link(self.point)

        mat = bpy.data.materials.new(pre + "part_colour")
        mat.use_nodes = True
        nt = mat.node_tree
        bsdf = nt.nodes.get("Principled BSDF")
        bsdf.inputs["Roughness"].default_value = 0.55
        attr = nt.nodes.new("ShaderNodeAttribute")
        attr.attribute_name = "part_color"
        attr.attribute_type = "GEOMETRY"
        nt.links.new(attr.outputs["Color"], bsdf.inputs["Base Color"])
        self.material = mat

        self.obj = bpy.data.objects.new(pre + "object", bpy.data.meshes.new(pre + "empty"))
        sc.collection.objects.link(self.obj)
        self.scene = sc
        return device_used

    @staticmethod
    def _set_device(device: str, sc) -> str:
        import bpy

        if device == "cpu":
            sc.cycles.device = "CPU"
            return "cpu"
        prefs = bpy.context.preferences.addons["cycles"].preferences
        for kind in ("OPTIX", "CUDA"):
            try:
                prefs.compute_device_type = kind
            except TypeError:
                continue
            prefs.get_devices()
            gpus = [d for d in prefs.devices if d.type == kind]
            if gpus:
                for d in prefs.devices:
                    d.use = d.type == kind
                sc.cycles.device = "GPU"
                return f"gpu:{kind.lower()}"
        if device == "cuda":
            raise RenderError("device 'cuda' was asked for but Cycles finds no CUDA/OptiX device; use 'auto' or 'cpu'")
        sc.cycles.device = "CPU"
        return "cpu"

    # -- per request -----------------------------------------------------------------------------------------------
    def _mesh(self, cls: str, instance: int):
        import bpy

        key = (cls, int(instance))
        me = self._cache.get(key)
        if me is not None:
            self._cache.move_to_end(key)
            return me
        data = build_object(cls, int(instance))
        me = bpy.data.meshes.new(f"{self._prefix}{cls}-{instance}")
        me.from_pydata(data.vertices.tolist(), [], [list(f) for f in data.faces])
        attr = me.attributes.new("part_color", "FLOAT_COLOR", "FACE")
        rgba = np.concatenate([data.face_colors, np.ones((len(data.faces), 1), np.float32)], axis=1)
        attr.data.foreach_set("color", rgba.ravel())
        me.polygons.foreach_set("use_smooth", data.smooth)
        me.materials.append(self.material)
        me.update()
        self._cache[key] = me
        if len(self._cache) > self.cache_size:
            _, old = self._cache.popitem(last=False)
            if self.obj.data is old:
                self.obj.data = me
            bpy.data.meshes.remove(old)
        return me

    def _apply(self, p: Mapping[str, Any]) -> None:
        from mathutils import Matrix

        self.obj.data = self._mesh(p["class"], p["instance"])
        self.camera.matrix_world = Matrix(camera_matrix(p["view_distance"], p["view_azimuth"], p["view_elevation"],
                                                        p["view_roll"]).tolist())
        self.sun.rotation_euler = (float(p["sun_alpha"]), float(p["sun_beta"]), float(p["sun_zeta"]))
        self.sun.data.energy = float(p["sun_energy"])
        self.point.location = spherical(p["light_distance"], p["light_azimuth"], p["light_elevation"])
        self.point.data.energy = float(p["light_energy"])

    def render_one(self, p: Mapping[str, Any]) -> np.ndarray:
        """RGBA uint8 (H, W, 4): RGB composited on the background, A the coverage of the object."""
        import bpy
        from PIL import Image

        self._apply(p)
        with _quiet_stdout():
            bpy.ops.render.render(write_still=True, scene=self.scene.name)
        with Image.open(self._path) as im:
            rgba = np.asarray(im.convert("RGBA"), dtype=np.float32) / 255.0
        os.unlink(self._path)
        a = rgba[..., 3:4]
        rgb = rgba[..., :3] * a + self.background * (1.0 - a)
        out = np.empty(rgba.shape, np.uint8)
        out[..., :3] = np.clip(np.rint(rgb * 255.0), 0, 255)
        out[..., 3] = np.rint(rgba[..., 3] * 255.0)
        return out

    def render(self, params: Sequence[Mapping[str, Any]]) -> np.ndarray:
        n = len(params)
        out = np.empty((n, self.resolution, self.resolution, 4), np.uint8)
        for i, p in enumerate(params):
            out[i] = self.render_one(p)
        return out

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)
        with contextlib.suppress(Exception):  # free this scene's data (matters for in-process renderers)
            import bpy

            self._cache.clear()
            for coll in (bpy.data.objects, bpy.data.meshes, bpy.data.lights, bpy.data.cameras, bpy.data.materials,
                         bpy.data.worlds, bpy.data.scenes):
                for item in [x for x in coll if x.name.startswith(self._prefix)]:
                    coll.remove(item)


def _strip_blender_script_paths() -> None:
    """Drop Blender's script folders that an in-process bpy added to sys.path and "spawn" copied to this child.

    Their pure-Python ``bpy`` package would shadow the real ``bpy`` extension module ("No module named '_bpy'").
    """
    sys.path[:] = [p for p in sys.path if not ("bpy" in p.split(os.sep) and "scripts" in p.split(os.sep))]


def _worker_main(conn, config: Dict[str, Any]) -> None:  # runs in a spawned process
    try:
        if "bpy" not in sys.modules:
            _strip_blender_script_paths()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # Blender's chatter; errors still reach stderr
        scene = _BlenderScene(**config)
        conn.send(("ready", (scene.device_used, scene._tmp)))
    except BaseException as e:  # noqa: BLE001 - report any start-up failure to the parent
        conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                break
            if msg[0] == "close":
                break
            try:
                _inject_fault(scene, msg[1])
                conn.send(("ok", scene.render(msg[1])))
            except BaseException as e:  # noqa: BLE001
                conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        scene.close()


def _inject_fault(scene: "_BlenderScene", chunk: Sequence[Mapping[str, Any]]) -> None:
    """The tests' crash (see :data:`_FAULT_ENV`): die mid-chunk, after one scene, as a real crash would."""
    fault = os.environ.get(_FAULT_ENV, "")
    if not fault:
        return
    if fault == "raise":
        raise RuntimeError(f"fault injected by {_FAULT_ENV}=raise")
    if fault.startswith("kill-once:"):
        try:
            os.close(os.open(fault[len("kill-once:"):], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
    elif fault != "kill":
        return
    if chunk:
        scene.render_one(chunk[0])
    os.kill(os.getpid(), signal.SIGKILL)


def _exit_reason(code: Optional[int]) -> str:
    """How a worker ended, in words: its signal (SIGKILL is often the out-of-memory killer) or its exit code."""
    if code is None:
        return "closed its pipe (exit code unknown)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        oom = " (the out-of-memory killer, or a kill -9)" if -code == signal.SIGKILL else ""
        return f"was killed by {name}{oom}, exit code {code}"
    return f"exited with code {code}"


def _describe_chunk(chunk: Sequence[Mapping[str, Any]], lo: int, n: int) -> str:
    names = ", ".join(f"{p['class']}#{p['instance']}" for p in chunk[:4]) + (", ..." if len(chunk) > 4 else "")
    return f"scenes {lo}-{lo + len(chunk) - 1} of {n}: {names}"


def _hint(what: str) -> str:
    if what != "start":
        return ""
    return ("; workers are started with 'spawn', which re-imports the main module: a script must create the "
            "renderer under `if __name__ == \"__main__\":` (or use workers=0); see the worker's traceback above")


# ---------------------------------------------------------------------------------------------------------------
# the public renderer
# ---------------------------------------------------------------------------------------------------------------


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

    def __init__(self, *, resolution: int = 64, samples: int = 8, workers: int = 2, device: str = "auto",
                 seed: int = 0, background: Tuple[float, float, float] = BACKGROUND, threads: Optional[int] = None,
                 timeout: float = 600.0, cache_size: int = 256, max_retries: int = 2):
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
        self._procs: List[Any] = []
        self._conns: List[Any] = []
        self._local: Optional[_BlenderScene] = None
        self._started = False
        self._closed = False
        self.device_used_: Optional[str] = None
        self.tmp_dirs_: List[str] = []
        self.restarts_ = 0
        self._worker_config: Dict[str, Any] = {}

    # -- life cycle ----------------------------------------------------------------------------------------------
    def _check(self) -> None:
        def bad(name, value, allowed):
            raise ConfigError(f"BlenderRenderer: {name}={value!r} is not valid; allowed: {allowed}")

        if isinstance(self.resolution, bool) or not isinstance(self.resolution, int) or not 8 <= self.resolution <= 4096:
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
        return dict(resolution=self.resolution, samples=self.samples, device=device, seed=int(self.seed),
                    threads=int(threads), background=tuple(float(v) for v in self.background),
                    cache_size=int(self.cache_size))

    def start(self) -> "BlenderRenderer":
        """Start the worker processes (or the in-process scene); called on first use. Returns self."""
        if self._closed:
            raise RenderError("BlenderRenderer: this renderer was closed (or a worker died); make a new one")
        if self._started:
            return self
        self._check()
        config = self._config()
        if self.workers == 0:
            self._local = _BlenderScene(**config)
            self.device_used_ = self._local.device_used
            self.tmp_dirs_ = [self._local._tmp]
            self._started = True
            return self
        self._worker_config = config
        try:
            for _ in range(self.workers):
                proc, conn = self._spawn()
                self._procs.append(proc)
                self._conns.append(conn)
            answers = [self._receive(i, what="start") for i in range(self.workers)]
        except BaseException:
            self._terminate()
            raise
        self.device_used_ = answers[0][0]
        self.tmp_dirs_ = [a[1] for a in answers]
        self._started = True
        return self

    def _spawn(self) -> Tuple[Any, Any]:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(child, self._worker_config), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def _try_send(self, i: int, msg: Any) -> bool:
        """Send to worker ``i``; False when it is dead (its pipe broken)."""
        try:
            if not self._procs[i].is_alive():
                return False
            self._conns[i].send(msg)
            return True
        except (BrokenPipeError, EOFError, OSError):
            return False

    def _restart(self, i: int) -> None:
        """Replace the dead worker ``i`` by a fresh one (not waited for) and remove the dead one's folder."""
        proc, conn = self._procs[i], self._conns[i]
        with contextlib.suppress(Exception):
            conn.close()
        if proc.is_alive():  # its pipe broke but it lingers: it cannot be trusted with another chunk
            proc.kill()
        proc.join(timeout=5)
        if i < len(self.tmp_dirs_):
            shutil.rmtree(self.tmp_dirs_[i], ignore_errors=True)  # a killed worker could not remove it
        self._procs[i], self._conns[i] = self._spawn()
        self.restarts_ += 1

    def _receive(self, i: int, *, what: str) -> Any:
        conn, proc = self._conns[i], self._procs[i]
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                ready = conn.poll(0.05)
            except (EOFError, OSError):
                ready = False
            if ready:
                try:
                    status, payload = conn.recv()
                except (EOFError, OSError):
                    status, payload = "died", None
                if status in ("ok", "ready"):
                    return payload
                self._terminate()
                if status == "died":
                    raise RenderError(f"render worker {i} (pid {proc.pid}) died during {what}; "
                                      f"exit code {proc.exitcode}{_hint(what)}")
                raise RenderError(f"render worker {i} failed during {what}: {payload}")
            if not proc.is_alive():
                code = proc.exitcode
                self._terminate()
                raise RenderError(f"render worker {i} (pid {proc.pid}) died during {what} with exit code {code}"
                                  f"{_hint(what)}")
            if time.monotonic() > deadline:
                self._terminate()
                raise RenderError(f"render worker {i} did not answer within {self.timeout} s during {what}")

    def _terminate(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(Exception):
                conn.send(("close",))
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        for conn in self._conns:
            with contextlib.suppress(Exception):
                conn.close()
        if self._procs:  # a worker that was killed could not remove its own folder
            for d in self.tmp_dirs_:
                shutil.rmtree(d, ignore_errors=True)
        self._procs, self._conns = [], []
        self._closed = True

    def close(self) -> None:
        """Stop the workers and delete the temporary folders. Safe to call twice."""
        if self._local is not None:
            self._local.close()
            self._local = None
        self._terminate()

    def __enter__(self) -> "BlenderRenderer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()

    # -- rendering -----------------------------------------------------------------------------------------------
    def render(self, params: Sequence[Mapping[str, Any]], *, return_alpha: bool = False
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
            try:
                rgba = self._render_pool(params)
            except BaseException:  # an interrupt would leave answers in the pipes for the next batch to misread
                self._terminate()
                raise
        if return_alpha:
            return np.ascontiguousarray(rgba[..., :3]), np.ascontiguousarray(rgba[..., 3])
        return np.ascontiguousarray(rgba[..., :3])

    def _render_pool(self, params: List[Mapping[str, Any]]) -> np.ndarray:
        """Chunk ``i`` goes to worker ``i``; a worker that dies is replaced and its chunk alone is sent again."""
        n = len(params)
        k = min(len(self._conns), n)
        bounds = np.linspace(0, n, k + 1).round().astype(int)
        # contiguous chunks: consecutive views of one object stay on one worker's mesh cache
        chunks = [params[bounds[i]:bounds[i + 1]] for i in range(k)]
        results: List[Optional[np.ndarray]] = [None] * k
        crashes = [0] * k
        phase: Dict[int, str] = {}  # worker -> "render" (holds its chunk) or "start" (a fresh one, not ready yet)
        deadline: Dict[int, float] = {}

        def submit(i: int) -> None:
            if self._try_send(i, ("render", chunks[i])):
                phase[i], deadline[i] = "render", time.monotonic() + self.timeout
            else:
                crashed(i, "before it got its chunk")

        def crashed(i: int, when: str) -> None:
            proc = self._procs[i]
            proc.join(timeout=5)
            reason = _exit_reason(proc.exitcode)
            crashes[i] += 1
            what = f"chunk {i}: {_describe_chunk(chunks[i], int(bounds[i]), n)}"
            if crashes[i] > self.max_retries:
                self._terminate()
                raise RenderError(f"render worker {i} (pid {proc.pid}) died {when} ({what}); it {reason}; "
                                  f"gave up after {crashes[i] - 1} restart(s) for this chunk (max_retries="
                                  f"{self.max_retries}); the renderer is closed, make a new one")
            logger.warning("render worker %d (pid %s) died %s (%s); it %s; restarting it and rendering the "
                           "chunk again (retry %d of %d)", i, proc.pid, when, what, reason, crashes[i],
                           self.max_retries)
            self._restart(i)
            phase[i], deadline[i] = "start", time.monotonic() + self.timeout

        for i in range(k):
            submit(i)
        while phase:
            waiting = {}
            for i in phase:
                waiting[self._conns[i]] = i
                waiting[self._procs[i].sentinel] = i
            left = min(deadline[i] for i in phase) - time.monotonic()
            ready = mp.connection.wait(list(waiting), timeout=max(left, 0.0))
            handled = set()
            for obj in ready:
                i = waiting[obj]
                if i in handled or i not in phase:
                    continue
                handled.add(i)
                conn, proc, stage = self._conns[i], self._procs[i], phase[i]
                has_msg = None
                try:
                    has_msg = conn.poll()
                    status, payload = conn.recv() if has_msg else ("died", None)
                except (EOFError, OSError):
                    status, payload = "died", None
                if status == "died":
                    if has_msg is False and proc.is_alive():  # a spurious wake-up
                        continue
                    del phase[i]
                    crashed(i, "while rendering its chunk" if stage == "render" else "while starting again")
                elif status == "ready" and stage == "start":
                    self.tmp_dirs_[i] = payload[1]
                    submit(i)
                elif status == "ok" and stage == "render":
                    results[i] = payload
                    del phase[i]
                else:
                    self._terminate()
                    what = "render" if stage == "render" else "restart"
                    raise RenderError(f"render worker {i} failed during {what}: {payload}")
            now = time.monotonic()
            late = [i for i in phase if now > deadline[i]]
            if late:
                self._terminate()
                what = "render" if phase[late[0]] == "render" else "restart"
                raise RenderError(f"render worker {late[0]} did not answer within {self.timeout} s during {what}")
        return np.concatenate(results)


def renderer_for(settings: Any, device: str = "auto") -> "BlenderRenderer":
    """A :class:`BlenderRenderer` with a scene section's settings (a :class:`~weakspot.scene.config.SceneParams`),
    not yet started."""
    return BlenderRenderer(resolution=settings.resolution, samples=settings.samples, workers=settings.workers,
                           device=device, seed=settings.seed)
