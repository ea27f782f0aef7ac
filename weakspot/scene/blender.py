"""The Blender side of the renderer: one scene (camera, sun, point light, ambient world, one object slot), built once
per process, an object's mesh swapped in per render.

Caveats first:

* ``bpy`` (Blender as a Python module, 5.0) runs headless and only with Cycles (EEVEE needs a display); it is
  imported when a :class:`BlenderScene` is made, never at import time. A missing bpy is a
  :class:`~weakspot.errors.RenderError`.
* Cycles writes its result to a PNG in a private temporary folder, which is read back and removed at once; the folder
  is deleted on :meth:`BlenderScene.close` (the in-memory Viewer-node route does not work headless in Blender 5.0).
* Deterministic: Cycles' sampling seed is ``seed`` and every pixel's sample sequence depends only on the seed and the
  pixel, so the same params and seed give the same pixels whichever process (and however many threads) renders them.
* The object is rendered over a transparent film (the world still lights it as a constant ambient light) and then
  composited onto a constant ``background`` grey, so the alpha channel is an exact foreground mask.
* Several scenes may live in one process (each names its data with its own prefix); the meshes of the last
  ``cache_size`` (class, instance) pairs are kept.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Sec. 4.1 (images rendered with Blender from 12 factors, Table 1).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from typing import Any, Mapping, Sequence, Tuple

import numpy as np

from weakspot.errors import RenderError
from weakspot.scene.camera import LENS_MM, SENSOR_MM, camera_matrix, spherical
from weakspot.scene.objects import build_object

#: Constant world (ambient) light strength, so that a scene with the sun off still shows the object.
AMBIENT = 0.5
#: The render's background grey (display values in [0, 1]).
BACKGROUND = (0.5, 0.5, 0.5)


@contextlib.contextmanager
def quiet_stdout():
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


class BlenderScene:
    """The scene (camera, sun, point light, ambient world, one object slot), built once; objects swapped per render.

    Parameters
    ----------
    resolution, samples : int
        Square image side in pixels; Cycles samples per pixel (no denoiser).
    device : {"auto", "cpu", "cuda"}
        Cycles on the GPU (OptiX, else CUDA) unless ``"cpu"``; ``"cuda"`` without a GPU is a RenderError.
    seed : int
        Cycles' sampling seed.
    threads : int
        Cycles threads (0: Blender's choice).
    background : (float, float, float)
        The grey the object is composited onto (display values in [0, 1]).
    cache_size : int, default 256
        Meshes kept (least recently used are dropped).

    Attributes
    ----------
    device_used : str
        Where Cycles renders: ``"cpu"``, ``"gpu:optix"`` or ``"gpu:cuda"``.
    tmp_dir : str
        The private folder Cycles writes its frame to (removed on :meth:`close`).
    """

    _count = 0

    def __init__(
        self,
        *,
        resolution: int,
        samples: int,
        device: str,
        seed: int,
        threads: int,
        background: Tuple[float, float, float],
        cache_size: int = 256,
    ):
        try:
            import bpy  # noqa: F401
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise RenderError(
                f"bpy (Blender as a Python module) is not importable: {e}; install bpy==5.0.1 (Python 3.11 only)"
            ) from None
        self.resolution = resolution
        self.background = np.asarray(background, dtype=np.float32)
        self.cache_size = cache_size
        self._cache: "OrderedDict[Tuple[str, int], Any]" = OrderedDict()
        self.tmp_dir = tempfile.mkdtemp(prefix="weakspot-render-")
        atexit.register(shutil.rmtree, self.tmp_dir, True)  # also when a renderer is never closed
        self._path = os.path.join(self.tmp_dir, "frame.png")
        self.device_used = self._build(resolution, samples, device, seed, threads)

    # -- set-up ----------------------------------------------------------------------------------------------------
    def _build(self, resolution, samples, device, seed, threads) -> str:
        import bpy

        # our own scene (and uniquely named data), so several in-process renderers can live side by side
        BlenderScene._count += 1
        pre = self._prefix = f"weakspot{os.getpid()}-{BlenderScene._count}-"
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
        self.camera.matrix_world = Matrix(
            camera_matrix(p["view_distance"], p["view_azimuth"], p["view_elevation"], p["view_roll"]).tolist()
        )
        self.sun.rotation_euler = (float(p["sun_alpha"]), float(p["sun_beta"]), float(p["sun_zeta"]))
        self.sun.data.energy = float(p["sun_energy"])
        self.point.location = spherical(p["light_distance"], p["light_azimuth"], p["light_elevation"])
        self.point.data.energy = float(p["light_energy"])

    def render_one(self, p: Mapping[str, Any]) -> np.ndarray:
        """RGBA uint8 (H, W, 4): RGB composited on the background, A the coverage of the object."""
        import bpy
        from PIL import Image

        self._apply(p)
        with quiet_stdout():
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
        """RGBA uint8 (n, H, W, 4), one :meth:`render_one` per scene params dict, in order."""
        n = len(params)
        out = np.empty((n, self.resolution, self.resolution, 4), np.uint8)
        for i, p in enumerate(params):
            out[i] = self.render_one(p)
        return out

    def close(self) -> None:
        """Delete the temporary folder and this scene's Blender data."""
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        with contextlib.suppress(Exception):  # free this scene's data (matters for in-process renderers)
            import bpy

            self._cache.clear()
            for coll in (
                bpy.data.objects,
                bpy.data.meshes,
                bpy.data.lights,
                bpy.data.cameras,
                bpy.data.materials,
                bpy.data.worlds,
                bpy.data.scenes,
            ):
                for item in [x for x in coll if x.name.startswith(self._prefix)]:
                    coll.remove(item)
