"""A procedural object set standing in for ShapeNet: ten everyday classes built from primitives.

Caveats first:

* ShapeNet cannot be downloaded here, so every object is built from lathed profiles, boxes and swept tubes. The
  shapes are simple but a person names each class at a glance (see ``contact_sheet`` in the renderer module).
* An instance is a pure function of ``(class, instance id)``: the id seeds a NumPy generator that draws the
  proportions and details (handle shape, number of legs, engines, ...). No bpy is needed to build a mesh, so this
  module is importable and testable without Blender; the renderer turns a :class:`MeshData` into a Blender mesh.
* Objects are normalised much like ShapeNet models: the bounding box is centred at the origin and its longest side
  is :data:`OBJECT_SIZE` = 0.75 (diagonal 0.75 to 1.3, ShapeNet's is 1), so the paper's distances in Table 1, in
  units of the object size, carry over. "Up" is +z.
* Colours are drawn from one palette for every class, so colour is no cue to the label.
* The classes the paper found hard (round, generic shapes: bowl, barrel, paper Sec. 4.2, Fig. 2) are kept, together
  with can, mug and bottle which share their silhouette from below.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Sec. 4 (ShapeNet classes such as airplane, barrel, bowl, cap, can, lamp, mug, piano).

Example
-------
>>> mesh = build_object("mug", 3)
>>> mesh.vertices.shape[1]
3
>>> train, val = split_instances(8, 2, seed=0)
>>> sorted(set(train) & set(val))
[]
"""

from __future__ import annotations

import colorsys
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from weakspot.errors import ConfigError
from weakspot.registry import Registry

OBJECTS = Registry("object class")

#: Size of every object: the longest side of its bounding box, in Blender units. (ShapeNet normalises the diagonal
#: to 1 instead; that shrinks flat objects such as airplanes to a few pixels at 32 px, so we fix the longest side.
#: A cube-like object then has diagonal 1.3, a flat one about 1.)
OBJECT_SIZE = 0.75

#: Default classes, in label order (label index = position in this list).
CLASSES: Tuple[str, ...] = ("airplane", "barrel", "bottle", "bowl", "can", "cap", "chair", "lamp", "mug", "table")


@dataclass
class MeshData:
    """A triangle/quad mesh with one colour per face, pure NumPy.

    Attributes
    ----------
    vertices : (V, 3) float64
    faces : list of int tuples (polygons, 3 or 4 corners, counter-clockwise seen from outside)
    face_colors : (F, 3) float32 linear RGB in [0, 1]
    smooth : (F,) bool, shade smooth (curved parts) or flat (boxes)
    """

    vertices: np.ndarray
    faces: List[Tuple[int, ...]]
    face_colors: np.ndarray
    smooth: np.ndarray

    @property
    def n_faces(self) -> int:
        return len(self.faces)

    def extent(self) -> np.ndarray:
        return self.vertices.max(0) - self.vertices.min(0)


# ---------------------------------------------------------------------------------------------------------------
# primitive builders (each returns a list of (vertices, faces, smooth) parts, coloured later)
# ---------------------------------------------------------------------------------------------------------------


class _Builder:
    """Accumulates parts, each with a colour and a smooth flag."""

    def __init__(self) -> None:
        self.verts: List[np.ndarray] = []
        self.faces: List[Tuple[int, ...]] = []
        self.colors: List[np.ndarray] = []
        self.smooth: List[bool] = []
        self._n = 0

    def add(self, v: np.ndarray, f: Sequence[Tuple[int, ...]], color: np.ndarray, smooth: bool) -> None:
        v = np.asarray(v, dtype=np.float64)
        self.verts.append(v)
        self.faces.extend(tuple(int(i) + self._n for i in face) for face in f)
        self.colors.extend([np.asarray(color, dtype=np.float32)] * len(f))
        self.smooth.extend([smooth] * len(f))
        self._n += len(v)

    def lathe(
        self,
        profile,
        color,
        *,
        segments: int = 24,
        center=(0.0, 0.0, 0.0),
        axis: str = "z",
        smooth: bool = True,
        scale_y: float = 1.0,
    ) -> None:
        """Surface of revolution of ``profile`` ((K, 2) rows of (radius, height)); radius 0 closes to a point."""
        p = np.asarray(profile, dtype=np.float64)
        t = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
        c, s = np.cos(t), np.sin(t)
        verts: List[Tuple[float, float, float]] = []
        index: List[List[int]] = []
        for r, z in p:
            if r <= 1e-9:
                index.append([len(verts)] * segments)
                verts.append((0.0, 0.0, z))
            else:
                index.append(list(range(len(verts), len(verts) + segments)))
                verts.extend(zip(r * c, r * s * scale_y, np.full(segments, z)))
        faces = []
        for a, b in zip(index[:-1], index[1:]):
            for j in range(segments):
                k = (j + 1) % segments
                quad = (a[j], a[k], b[k], b[j])
                uniq = tuple(dict.fromkeys(quad))
                if len(uniq) >= 3:
                    faces.append(uniq)
        v = np.array(verts)
        v = _orient(v, axis) + np.asarray(center, dtype=np.float64)
        self.add(v, faces, color, smooth)

    def box(self, center, size, color, *, rotz: float = 0.0, shear_x_per_z: float = 0.0) -> None:
        """Axis-aligned box (optionally turned about z, or sheared for swept wings)."""
        sx, sy, sz = np.asarray(size, dtype=np.float64) / 2
        v = np.array([[x, y, z] for z in (-sz, sz) for y in (-sy, sy) for x in (-sx, sx)])
        v = _rotz(v, rotz) + np.asarray(center, dtype=np.float64)
        faces = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
        self.add(v, faces, color, False)

    def quad_slab(self, corners_xy, z0: float, z1: float, color) -> None:
        """A prism over a convex quadrilateral ``corners_xy`` (4, 2) (counter-clockwise), from z0 to z1."""
        q = np.asarray(corners_xy, dtype=np.float64)
        v = np.concatenate([np.c_[q, np.full(4, z0)], np.c_[q, np.full(4, z1)]])
        faces = [(3, 2, 1, 0), (4, 5, 6, 7)] + [(i, (i + 1) % 4, 4 + (i + 1) % 4, 4 + i) for i in range(4)]
        self.add(v, faces, color, False)

    def tube(self, path, radius: float, color, *, segments: int = 10) -> None:
        """A circular tube swept along a polyline ``path`` (K, 3), with flat end caps."""
        path = np.asarray(path, dtype=np.float64)
        tang = np.gradient(path, axis=0)
        tang /= np.linalg.norm(tang, axis=1, keepdims=True)
        ref = np.array([0.0, 0.0, 1.0]) if abs(tang[0, 2]) < 0.9 else np.array([1.0, 0.0, 0.0])
        n = np.cross(tang[0], ref)
        n /= np.linalg.norm(n)
        t = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
        verts = []
        for i, (p, d) in enumerate(zip(path, tang)):
            n = n - np.dot(n, d) * d  # parallel transport
            n /= np.linalg.norm(n)
            b = np.cross(d, n)
            verts.append(p + radius * (np.outer(np.cos(t), n) + np.outer(np.sin(t), b)))
        v = np.concatenate(verts)
        faces: List[Tuple[int, ...]] = []
        for i in range(len(path) - 1):
            a, b = i * segments, (i + 1) * segments
            for j in range(segments):
                k = (j + 1) % segments
                faces.append((a + j, a + k, b + k, b + j))
        faces.append(tuple(range(segments - 1, -1, -1)))
        last = (len(path) - 1) * segments
        faces.append(tuple(range(last, last + segments)))
        self.add(v, faces, color, True)

    def mesh(self) -> MeshData:
        v = np.concatenate(self.verts)
        return MeshData(v, self.faces, np.array(self.colors, dtype=np.float32), np.array(self.smooth, dtype=bool))


def _orient(v: np.ndarray, axis: str) -> np.ndarray:
    if axis == "z":
        return v
    if axis == "x":  # lathe axis z -> x
        return v[:, [2, 1, 0]] * np.array([1.0, 1.0, -1.0])
    if axis == "y":
        return v[:, [0, 2, 1]] * np.array([1.0, 1.0, -1.0])
    raise ValueError(axis)


def _rotz(v: np.ndarray, a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return v @ np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])


def _palette(rng: np.random.Generator, k: int) -> List[np.ndarray]:
    """``k`` distinct colours from one class-independent palette (linear RGB)."""
    h0 = rng.uniform()
    out = []
    for i in range(k):
        h = (h0 + i * rng.uniform(0.25, 0.5)) % 1.0
        s = rng.uniform(0.15, 0.7)
        v = rng.uniform(0.45, 0.9)
        srgb = np.array(colorsys.hsv_to_rgb(h, s, v))
        out.append((srgb**2.2).astype(np.float32))  # sRGB -> linear (approximately)
    return out


def _vessel_profile(
    radius_fn: Callable[[np.ndarray], np.ndarray], height: float, wall: float, floor: float, n: int = 10
) -> np.ndarray:
    """Outer wall up, rim, inner wall down: an open, thick-walled vessel (mug, bowl)."""
    z = np.linspace(0.0, height, n)
    outer = np.c_[radius_fn(z), z]
    zi = np.linspace(height, floor, n)
    inner = np.c_[np.maximum(radius_fn(zi) - wall, 1e-3), zi]
    return np.concatenate([[[0.0, 0.0]], outer, inner, [[0.0, floor]]])


# ---------------------------------------------------------------------------------------------------------------
# the classes
# ---------------------------------------------------------------------------------------------------------------


@OBJECTS.register("mug")
def _mug(rng: np.random.Generator, b: _Builder) -> None:
    body, handle = _palette(rng, 2)
    if rng.uniform() < 0.5:
        handle = body
    r = 0.5
    h = r * rng.uniform(1.6, 2.6)
    taper = rng.uniform(-0.12, 0.12)
    rf = lambda z: r * (1 + taper * (z / h - 0.5))  # noqa: E731
    b.lathe(_vessel_profile(rf, h, wall=0.06, floor=0.08), body, segments=28)
    # handle: a C (round) or D (square-ish) loop on the +x side
    hz0, hz1 = h * rng.uniform(0.15, 0.3), h * rng.uniform(0.7, 0.88)
    reach = r * rng.uniform(0.45, 0.8)
    t = np.linspace(-np.pi / 2, np.pi / 2, 14)
    mid, half = (hz0 + hz1) / 2, (hz1 - hz0) / 2
    if rng.uniform() < 0.5:
        xs = r * 0.9 + reach * np.cos(t)
    else:
        xs = r * 0.9 + reach * np.clip(1.6 * np.cos(t), 0, 1)
    path = np.c_[xs, np.zeros_like(t), mid + half * np.sin(t)]
    b.tube(path, radius=rng.uniform(0.045, 0.07), color=handle)


@OBJECTS.register("bowl")
def _bowl(rng: np.random.Generator, b: _Builder) -> None:
    (body,) = _palette(rng, 1)
    r = 0.5
    h = r * rng.uniform(0.45, 0.8)
    base = r * rng.uniform(0.3, 0.55)
    power = rng.uniform(1.6, 3.0)
    rf = lambda z: base + (r - base) * (z / h) ** (1 / power)  # noqa: E731
    b.lathe(_vessel_profile(rf, h, wall=0.035, floor=0.04, n=12), body, segments=32)
    if rng.uniform() < 0.6:  # a foot ring
        fh = h * rng.uniform(0.06, 0.12)
        b.lathe([[0.0, -fh], [base * 0.9, -fh], [base * 0.95, 0.0], [0.0, 0.0]], body, segments=32)


@OBJECTS.register("barrel")
def _barrel(rng: np.random.Generator, b: _Builder) -> None:
    wood, hoop = _palette(rng, 2)
    r_mid = 0.5
    r_end = r_mid * rng.uniform(0.72, 0.88)
    h = 2 * r_mid * rng.uniform(1.15, 1.6)
    z = np.linspace(0.0, h, 13)
    r = r_end + (r_mid - r_end) * (1 - (2 * z / h - 1) ** 2)
    prof = np.concatenate(
        [[[0.0, 0.02 * h]], [[r_end * 0.92, 0.02 * h]], np.c_[r, z], [[r_end * 0.92, 0.98 * h]], [[0.0, 0.98 * h]]]
    )
    b.lathe(prof, wood, segments=28)
    n_hoops = int(rng.integers(2, 5))
    zs = np.linspace(0.08, 0.92, n_hoops) * h if n_hoops > 2 else np.array([0.12, 0.88]) * h
    for zc in zs:
        rc = r_end + (r_mid - r_end) * (1 - (2 * zc / h - 1) ** 2) + 0.012
        w = h * 0.025
        b.lathe([[rc - 0.01, zc - w], [rc, zc - w], [rc, zc + w], [rc - 0.01, zc + w]], hoop, segments=28, smooth=False)


@OBJECTS.register("bottle")
def _bottle(rng: np.random.Generator, b: _Builder) -> None:
    glass, cap, label = _palette(rng, 3)
    r = 0.5
    body_h = r * rng.uniform(2.2, 3.6)
    shoulder = r * rng.uniform(0.5, 1.3)
    neck_r = r * rng.uniform(0.25, 0.38)
    neck_h = r * rng.uniform(0.6, 1.6)
    s = np.linspace(0, 1, 7)
    sh = np.c_[neck_r + (r - neck_r) * (1 - s**2) ** 0.5 * (1 - s) ** 0.3, body_h + shoulder * s]
    prof = np.concatenate(
        [
            [[0.0, 0.0], [r * 0.95, 0.0], [r, 0.04]],
            [[r, body_h]],
            sh[1:],
            [[neck_r, body_h + shoulder + neck_h]],
            [[0.0, body_h + shoulder + neck_h]],
        ]
    )
    b.lathe(prof, glass, segments=24)
    top = body_h + shoulder + neck_h
    ch = r * rng.uniform(0.15, 0.3)
    b.lathe(
        [[0.0, top - 0.02], [neck_r * 1.15, top - 0.02], [neck_r * 1.15, top + ch], [0.0, top + ch]],
        cap,
        segments=20,
        smooth=False,
    )
    if rng.uniform() < 0.7:  # a label band
        z0 = body_h * rng.uniform(0.2, 0.45)
        z1 = z0 + body_h * rng.uniform(0.25, 0.45)
        b.lathe([[r + 0.005, z0], [r + 0.008, z0], [r + 0.008, z1], [r + 0.005, z1]], label, segments=24)


@OBJECTS.register("can")
def _can(rng: np.random.Generator, b: _Builder) -> None:
    metal, label = _palette(rng, 2)
    r = 0.5
    h = 2 * r * rng.uniform(0.9, 1.9)
    neck = r * rng.uniform(0.82, 0.92)
    bev = h * 0.06
    prof = [[0.0, bev * 0.5], [neck, 0.0], [r, bev], [r, h - bev], [neck, h], [neck * 0.97, h - 0.02], [0.0, h - 0.04]]
    b.lathe(prof, metal, segments=28)
    if rng.uniform() < 0.8:
        b.lathe(
            [[r + 0.004, bev * 1.3], [r + 0.006, bev * 1.3], [r + 0.006, h - bev * 1.3], [r + 0.004, h - bev * 1.3]],
            label,
            segments=28,
        )
    if rng.uniform() < 0.6:  # pull tab
        b.box((neck * 0.35, 0.0, h - 0.01), (0.22 * r, 0.1 * r, 0.02), metal)


@OBJECTS.register("cap")
def _cap(rng: np.random.Generator, b: _Builder) -> None:
    cloth, brim_c = _palette(rng, 2)
    if rng.uniform() < 0.5:
        brim_c = cloth
    r = 0.5
    h = r * rng.uniform(0.65, 0.95)
    t = np.linspace(0.0, np.pi / 2, 9)
    outer = np.c_[r * np.cos(t), h * np.sin(t)]
    inner = np.c_[(r - 0.03) * np.cos(t[::-1]), (h - 0.03) * np.sin(t[::-1])]
    prof = np.concatenate([outer, inner[:-1], [[0.0, h - 0.03]]])
    b.lathe(prof[::-1], cloth, segments=28, scale_y=rng.uniform(0.85, 1.0))
    # brim: a curved plate in front (+x), slightly drooping
    length = r * rng.uniform(0.7, 1.1)
    width = rng.uniform(0.75, 1.0)
    n = 9
    ang = np.linspace(-np.pi / 2 * width, np.pi / 2 * width, n)
    droop = rng.uniform(0.0, 0.12)
    inner_e = np.c_[r * np.cos(ang) * 0.95, r * np.sin(ang) * 0.95]
    outer_e = inner_e + np.c_[length * np.cos(ang) ** 1.5, 0.6 * length * np.sin(ang) * np.abs(np.sin(ang))]
    verts, faces = [], []
    for i in range(n):
        zo = 0.02 - droop * (1 - abs(ang[i]) / (np.pi / 2))
        verts += [[*inner_e[i], 0.02], [*outer_e[i], zo], [*inner_e[i], 0.0], [*outer_e[i], zo - 0.025]]
    for i in range(n - 1):
        a, c = 4 * i, 4 * (i + 1)
        faces += [(a, a + 1, c + 1, c), (a + 2, c + 2, c + 3, a + 3), (a + 1, a + 3, c + 3, c + 1)]
    b.add(np.array(verts), faces, brim_c, False)
    if rng.uniform() < 0.7:  # button on top
        b.lathe([[0.0, h - 0.01], [0.05, h - 0.01], [0.05, h + 0.02], [0.0, h + 0.035]], brim_c, segments=12)


@OBJECTS.register("lamp")
def _lamp(rng: np.random.Generator, b: _Builder) -> None:
    base_c, shade_c = _palette(rng, 2)
    floor_lamp = rng.uniform() < 0.5
    h = rng.uniform(2.0, 2.8) if floor_lamp else rng.uniform(1.2, 1.8)
    base_r = rng.uniform(0.3, 0.45)
    if rng.uniform() < 0.6:
        b.lathe([[0.0, 0.0], [base_r, 0.0], [base_r * 0.9, 0.08], [0.0, 0.1]], base_c, segments=24)
    else:
        b.box((0.0, 0.0, 0.04), (2 * base_r, 2 * base_r * 0.8, 0.08), base_c)
    bent = rng.uniform() < 0.45
    if bent:  # desk-lamp arm: up, then over
        reach = rng.uniform(0.4, 0.8)
        path = np.array([[0, 0, 0.08], [0, 0, h * 0.55], [reach * 0.5, 0, h * 0.85], [reach, 0, h * 0.9]])
        path = np.concatenate([np.linspace(path[i], path[i + 1], 4, endpoint=False) for i in range(3)] + [path[-1:]])
        top = path[-1]
    else:
        path = np.linspace([0, 0, 0.08], [0, 0, h], 6)
        top = path[-1]
    b.tube(path, rng.uniform(0.025, 0.045), base_c, segments=8)
    sh = rng.uniform(0.5, 0.8)
    r_bot = rng.uniform(0.4, 0.6)
    r_top = r_bot * rng.uniform(0.45, 1.0) if rng.uniform() < 0.8 else r_bot * 0.2
    z0 = top[2] - sh * (0.75 if not bent else 1.0)
    # an open shade (a thin-walled frustum)
    prof = [[r_bot, z0], [r_top, z0 + sh], [r_top - 0.02, z0 + sh], [r_bot - 0.02, z0]]
    b.lathe(prof + [prof[0]], shade_c, segments=28, center=(top[0], 0.0, 0.0))


@OBJECTS.register("table")
def _table(rng: np.random.Generator, b: _Builder) -> None:
    top_c, leg_c = _palette(rng, 2)
    if rng.uniform() < 0.5:
        leg_c = top_c
    length = 1.0
    width = length * rng.uniform(0.5, 1.0)
    height = length * rng.uniform(0.55, 0.85)
    th = rng.uniform(0.035, 0.07)
    round_top = rng.uniform() < 0.35
    if round_top:
        width = length
        b.lathe(
            [[0.0, height - th], [0.5, height - th], [0.5, height], [0.0, height]], top_c, segments=32, smooth=False
        )
    else:
        b.box((0.0, 0.0, height - th / 2), (length, width, th), top_c)
    if round_top and rng.uniform() < 0.6:  # pedestal
        b.tube(np.linspace([0, 0, 0.02], [0, 0, height - th], 4), rng.uniform(0.04, 0.07), leg_c)
        b.lathe([[0.0, 0.0], [0.3, 0.0], [0.25, 0.05], [0.0, 0.06]], leg_c, segments=24)
        return
    leg = rng.uniform(0.04, 0.07)
    inset = rng.uniform(0.04, 0.12)
    if round_top:
        xs = [(0.5 - inset - 0.05) * np.cos(a) for a in np.arange(4) * np.pi / 2 + np.pi / 4]
        ys = [(0.5 - inset - 0.05) * np.sin(a) for a in np.arange(4) * np.pi / 2 + np.pi / 4]
    else:
        xs = [s * (length / 2 - inset) for s in (-1, 1, 1, -1)]
        ys = [s * (width / 2 - inset) for s in (-1, -1, 1, 1)]
    for x, y in zip(xs, ys):
        b.box((x, y, (height - th) / 2), (leg, leg, height - th), leg_c)
    if rng.uniform() < 0.4 and not round_top:  # a stretcher shelf
        sz = (height - th) * rng.uniform(0.2, 0.35)
        b.box((0.0, 0.0, sz), (length - 2 * inset, width - 2 * inset, th * 0.6), leg_c)


@OBJECTS.register("chair")
def _chair(rng: np.random.Generator, b: _Builder) -> None:
    seat_c, frame_c = _palette(rng, 2)
    if rng.uniform() < 0.4:
        frame_c = seat_c
    w = 1.0
    d = w * rng.uniform(0.85, 1.1)
    seat_h = w * rng.uniform(0.8, 1.05)
    back_h = w * rng.uniform(0.8, 1.3)
    th = rng.uniform(0.06, 0.12)
    leg = rng.uniform(0.05, 0.08)
    b.box((0.0, 0.0, seat_h - th / 2), (d, w, th), seat_c)
    for sx in (-1, 1):
        for sy in (-1, 1):
            b.box((sx * (d / 2 - leg), sy * (w / 2 - leg), (seat_h - th) / 2), (leg, leg, seat_h - th), frame_c)
    # the back is at -x, rising from the seat
    bx = -d / 2 + leg / 2
    tilt = rng.uniform(0.0, 0.15)
    if rng.uniform() < 0.5:  # solid back
        b.box((bx - tilt * back_h / 2, 0.0, seat_h + back_h / 2), (leg, w, back_h), seat_c)
    else:  # posts, a top rail and slats
        for sy in (-1, 1):
            b.box((bx, sy * (w / 2 - leg / 2), seat_h + back_h / 2), (leg, leg, back_h), frame_c)
        b.box((bx, 0.0, seat_h + back_h - 0.06), (leg, w, 0.12), frame_c)
        n_slats = int(rng.integers(2, 5))
        for y in np.linspace(-w / 2 + 0.2, w / 2 - 0.2, n_slats):
            b.box((bx, y, seat_h + back_h / 2), (leg * 0.6, 0.06, back_h - 0.1), frame_c)
    if rng.uniform() < 0.35:  # armrests
        ah = seat_h + back_h * rng.uniform(0.25, 0.4)
        for sy in (-1, 1):
            b.box((0.0, sy * (w / 2 - leg / 2), ah), (d, leg * 1.2, leg), frame_c)
            b.box((d / 2 - leg, sy * (w / 2 - leg / 2), (seat_h + ah) / 2), (leg, leg, ah - seat_h), frame_c)


@OBJECTS.register("airplane")
def _airplane(rng: np.random.Generator, b: _Builder) -> None:
    body_c, accent = _palette(rng, 2)
    if rng.uniform() < 0.6:
        accent = body_c
    length = 4.0
    r = length * rng.uniform(0.06, 0.085)
    s = np.linspace(0.0, 1.0, 14)
    prof_r = r * np.minimum(1.0, np.minimum((s / 0.12) ** 0.5, ((1 - s) / 0.3) ** 0.8))
    prof = np.c_[prof_r, s * length - length / 2]
    prof[0, 0] = prof[-1, 0] = 0.0
    b.lathe(prof, body_c, segments=18, axis="x")  # blunt nose at -x, tapered tail at +x
    span = length * rng.uniform(0.8, 1.1)
    chord = length * rng.uniform(0.1, 0.17)
    sweep = rng.uniform(0.0, 0.45) * span / 2
    wx = rng.uniform(-0.1, 0.15) * length
    taper = rng.uniform(0.3, 0.7)
    for sy in (-1, 1):
        q = [
            [wx + chord / 2, 0.0],
            [wx - chord / 2, 0.0],
            [wx + sweep - chord * taper / 2, sy * span / 2],
            [wx + sweep + chord * taper / 2, sy * span / 2],
        ]
        q = q if sy > 0 else q[::-1]
        b.quad_slab(q, -0.035 - r * 0.3, 0.035 - r * 0.3, accent)
    # tail surfaces at the +x end
    tail_x = length / 2 * 0.85
    tspan = span * rng.uniform(0.3, 0.42)
    tch = chord * 0.7
    for sy in (-1, 1):
        q = [
            [tail_x + tch / 2, 0.0],
            [tail_x - tch / 2, 0.0],
            [tail_x - tch * 0.2, sy * tspan / 2],
            [tail_x + tch * 0.4, sy * tspan / 2],
        ]
        q = q if sy < 0 else q[::-1]
        b.quad_slab(q, r * 0.2 - 0.015, r * 0.2 + 0.015, accent)
    fin_h = length * rng.uniform(0.12, 0.2)
    verts = np.array(
        [
            [tail_x - tch, -0.015, r * 0.5],
            [tail_x + tch * 0.8, -0.015, r * 0.5],
            [tail_x + tch * 1.1, -0.015, r + fin_h],
            [tail_x + tch * 0.5, -0.015, r + fin_h],
        ]
    )
    verts = np.concatenate([verts, verts + [0.0, 0.03, 0.0]])
    faces = [(0, 1, 2, 3), (7, 6, 5, 4), (0, 4, 5, 1), (1, 5, 6, 2), (2, 6, 7, 3), (3, 7, 4, 0)]
    b.add(verts, faces, accent, False)
    n_eng = int(rng.choice([0, 2, 4]))
    for k in range(n_eng // 2):
        yy = span / 2 * (0.35 + 0.3 * k)
        for sy in (-1, 1):
            ex = wx + sweep * yy / (span / 2) - chord * 0.6
            er = r * 0.4
            b.lathe(
                [[0.0, 0.0], [er, 0.05], [er, chord * 0.9], [er * 0.7, chord], [0.0, chord]],
                body_c,
                segments=12,
                axis="x",
                center=(ex, sy * yy, -r * 0.3 - er),
            )


# ---------------------------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------------------------


def _instance_rng(cls: str, instance: int) -> np.random.Generator:
    # crc32 of the class name: stable across processes (Python's hash() is salted per process)
    return np.random.default_rng([zlib.crc32(cls.encode()), int(instance)])


def build_object(cls: str, instance: int) -> MeshData:
    """Build instance ``instance`` of class ``cls``: a :class:`MeshData` centred, longest side :data:`OBJECT_SIZE`.

    Parameters
    ----------
    cls : str
        A registered class name (see :data:`CLASSES` and ``OBJECTS.names()``).
    instance : int
        Non-negative instance id; the same id always gives the same object (also across processes).

    Raises
    ------
    ConfigError
        Unknown class (the message lists the valid ones) or a negative / non-integer instance id.
    """
    make = OBJECTS.get(cls)
    if isinstance(instance, bool) or not isinstance(instance, (int, np.integer)) or instance < 0:
        raise ConfigError(f"instance: expected a non-negative int id for class {cls!r}, got {instance!r}")
    b = _Builder()
    make(_instance_rng(cls, int(instance)), b)
    mesh = b.mesh()
    lo, hi = mesh.vertices.min(0), mesh.vertices.max(0)
    mesh.vertices = (mesh.vertices - (lo + hi) / 2) * (OBJECT_SIZE / float(np.max(hi - lo)))
    return mesh


def class_index(classes: Sequence[str]) -> Dict[str, int]:
    """Label index of each class name (its position), after checking every name is registered."""
    for c in classes:
        OBJECTS.get(c)
    if len(set(classes)) != len(classes):
        raise ConfigError(f"classes: duplicate names in {list(classes)}")
    return {c: i for i, c in enumerate(classes)}


def split_instances(n_train: int, n_val: int, *, seed: int, pool: Optional[int] = None) -> Tuple[List[int], List[int]]:
    """Draw disjoint train and validation instance ids from ``range(pool)`` by a seeded permutation.

    Parameters
    ----------
    n_train, n_val : int
        How many ids in each split (``n_val`` may be 0).
    seed : int
        The same seed gives the same split.
    pool : int, optional
        Size of the id pool; default ``n_train + n_val``. A larger pool gives different instances per seed.

    Returns
    -------
    (train_ids, val_ids) : two sorted lists of ints, disjoint.
    """
    if n_train < 1 or n_val < 0:
        raise ConfigError(f"split_instances: need n_train >= 1 and n_val >= 0, got n_train={n_train}, n_val={n_val}")
    pool = n_train + n_val if pool is None else int(pool)
    if pool < n_train + n_val:
        raise ConfigError(f"split_instances: pool={pool} is smaller than n_train + n_val = {n_train + n_val}")
    perm = np.random.default_rng(seed).permutation(pool)
    return sorted(int(i) for i in perm[:n_train]), sorted(int(i) for i in perm[n_train : n_train + n_val])
