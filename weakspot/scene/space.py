"""The space S of rendering conditions: the 12 factors of the paper's Table 1, in Blender units.

Caveats first:

* The factor *names and order* are those of Table 1 (the RL examiner samples them in this order, paper Sec. 4.5);
  the 3 sun rotation angles are not searched (the examiner has no control over the sun, paper Sec. 4.1): they are
  ``fixed``, the other 9 are ``searched``.
* Units: sun angles in radians (Table 1 gives 0..2 pi), every other angle in degrees (Table 1), energies and
  distances in Blender units for an object whose bounding box's longest side is 0.75 (diagonal 0.75 to 1.3, near
  ShapeNet's normalisation to diagonal 1; see :data:`weakspot.scene.objects.OBJECT_SIZE`). Where the paper's number would not keep the object recognisable in *our* scene
  (the paper's g(z, s) must keep the label, Sec. 2.1), the default bound is mapped; :data:`PAPER_BOUNDS` keeps
  Table 1 verbatim and :data:`DEFAULT_BOUNDS` documents each mapping:

  - ``light_energy``: Table 1 gives 0.3..1 (the old Blender-Internal lamp energy, no physical unit). A Cycles point
    light's power is in watts and falls off with distance squared; at 8..20 units away, 0.3..1 W would be
    invisible, so the range is scaled by 3000 W: 900..3000 W (irradiance 0.2..3.7 W/m^2, comparable to the sun).
  - ``view_distance``: Table 1 gives 1..5 object sizes. With our camera (50 mm lens, 36 mm sensor, 39.6 degrees
    field of view) distance 1 crops the object and at 5 it covers a sixth of a 32-pixel frame (5 pixels), too few to
    name it, so the range is mapped to 1.3..2.8: the longest side spans about 80 % to 37 % of the frame width.
  - ``sun_energy`` (0..5) is kept as the Cycles sun strength in W/m^2: with the fixed ambient light of the
    renderer's world and the AgX view transform, 0 is dim but visible and 5 is bright but not clipped.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Table 1 and Sec. 4.1.

Example
-------
>>> import numpy as np
>>> space = SceneSpace()
>>> len(space.factors), len(space.searched), space.fixed
(12, 9, ['sun_alpha', 'sun_beta', 'sun_zeta'])
>>> p = space.sample(np.random.default_rng(0), 2)[0]
>>> space.validate(p) is None
True
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from weakspot.errors import ConfigError

#: Table 1 order: sun rotation (alpha_o, beta_o, zeta_o), sun energy Gamma_o, point light energy Gamma_l, distance
#: r_l, azimuth A_l, elevation U_l, viewpoint distance r_v, azimuth A_v, elevation U_v, roll theta_v.
FACTORS: Tuple[str, ...] = (
    "sun_alpha",
    "sun_beta",
    "sun_zeta",
    "sun_energy",
    "light_energy",
    "light_distance",
    "light_azimuth",
    "light_elevation",
    "view_distance",
    "view_azimuth",
    "view_elevation",
    "view_roll",
)
FIXED: Tuple[str, ...] = ("sun_alpha", "sun_beta", "sun_zeta")  # paper Sec. 4.1: the sun is not the examiner's
SEARCHED: Tuple[str, ...] = tuple(f for f in FACTORS if f not in FIXED)

#: The RL examiner's default sampling order (paper Sec. 4.5): point light energy Gamma_l first, then the sun's energy
#: Gamma_o, the light's r_l, A_l, U_l and the viewpoint's r_v, A_v, U_v, theta_v.
RL_ORDER: Tuple[str, ...] = (
    "light_energy",
    "sun_energy",
    "light_distance",
    "light_azimuth",
    "light_elevation",
    "view_distance",
    "view_azimuth",
    "view_elevation",
    "view_roll",
)
#: Sec. 4.5's second order, viewpoint factors first: r_v, A_v, U_v, theta_v, Gamma_l, Gamma_o, r_l, A_l, U_l.
RL_ORDER_VIEW_FIRST: Tuple[str, ...] = RL_ORDER[-4:] + RL_ORDER[:-4]

#: Table 1 of the paper, verbatim (LB, UB).
PAPER_BOUNDS: Dict[str, Tuple[float, float]] = {
    "sun_alpha": (0.0, 2 * math.pi),
    "sun_beta": (0.0, 2 * math.pi),
    "sun_zeta": (0.0, 2 * math.pi),
    "sun_energy": (0.0, 5.0),
    "light_energy": (0.3, 1.0),
    "light_distance": (8.0, 20.0),
    "light_azimuth": (0.0, 360.0),
    "light_elevation": (-90.0, 90.0),
    "view_distance": (1.0, 5.0),
    "view_azimuth": (0.0, 180.0),
    "view_elevation": (-90.0, 90.0),
    "view_roll": (0.0, 360.0),
}

#: Table 1 mapped to Blender units for our scene (see the module docstring for each mapping).
DEFAULT_BOUNDS: Dict[str, Tuple[float, float]] = {
    **PAPER_BOUNDS,
    "light_energy": (900.0, 3000.0),  # Table 1: 0.3..1, x 3000 W (Cycles point-light power)
    "view_distance": (1.3, 2.8),  # Table 1: 1..5 object sizes, compressed so the object stays nameable
}

UNITS: Dict[str, str] = {
    "sun_alpha": "rad",
    "sun_beta": "rad",
    "sun_zeta": "rad",
    "sun_energy": "W/m^2",
    "light_energy": "W",
    "light_distance": "object sizes",
    "light_azimuth": "deg",
    "light_elevation": "deg",
    "view_distance": "object sizes",
    "view_azimuth": "deg",
    "view_elevation": "deg",
    "view_roll": "deg",
}


class SceneSpace:
    """The Cartesian product of the 12 factor ranges of the paper's Table 1 (in Blender units).

    Parameters
    ----------
    bounds : dict of str -> (float, float), optional
        Overrides for some or all factors (e.g. ``{"view_elevation": (-30, 30)}`` for the artificial weakness of
        paper Sec. 4.4). ``None`` gives :data:`DEFAULT_BOUNDS` (Table 1 mapped to Blender units).

    Attributes
    ----------
    factors : list of str
        All 12 names in Table 1 order.
    bounds : dict of str -> (lo, hi)
        All 12 ranges.
    searched : list of str
        The 9 factors an examiner searches (all but the sun rotation, paper Sec. 4.1).
    fixed : list of str
        The 3 sun rotation angles, drawn at random once per examination.

    Raises
    ------
    ConfigError
        An unknown factor name (the message lists the valid ones) or a range that is not finite with lo < hi.
    """

    def __init__(self, bounds: Optional[Mapping[str, Sequence[float]]] = None):
        merged = dict(DEFAULT_BOUNDS)
        for name, pair in (bounds or {}).items():
            if name not in DEFAULT_BOUNDS:
                raise ConfigError(f"bounds: unknown factor {name!r}; valid factors: {', '.join(FACTORS)}")
            try:
                lo, hi = (float(x) for x in pair)
            except (TypeError, ValueError):
                raise ConfigError(f"bounds[{name!r}]: expected a pair (lo, hi) of numbers, got {pair!r}") from None
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ConfigError(f"bounds[{name!r}]: need finite lo < hi, got ({lo}, {hi})")
            merged[name] = (lo, hi)
        self._check_physical(merged)
        self._bounds = merged

    @staticmethod
    def _check_physical(b: Dict[str, Tuple[float, float]]) -> None:
        for name in ("sun_energy", "light_energy"):
            if b[name][0] < 0:
                raise ConfigError(f"bounds[{name!r}]: an energy cannot be negative, got {b[name]}")
        for name in ("light_distance", "view_distance"):
            if b[name][0] <= 0.7:
                raise ConfigError(
                    f"bounds[{name!r}]: lower bound {b[name][0]} would put the {name.split('_')[0]} inside the object"
                    " (objects have bounding-box diagonal up to 1.3); use a lower bound > 0.7"
                )
        for name in ("light_elevation", "view_elevation"):
            if b[name][0] < -90 or b[name][1] > 90:
                raise ConfigError(f"bounds[{name!r}]: elevation must lie within [-90, 90] degrees, got {b[name]}")

    # -- the interface examiners code against ------------------------------------------------------------------
    @property
    def factors(self) -> List[str]:
        return list(FACTORS)

    @property
    def bounds(self) -> Dict[str, Tuple[float, float]]:
        return dict(self._bounds)

    @property
    def searched(self) -> List[str]:
        return list(SEARCHED)

    @property
    def fixed(self) -> List[str]:
        return list(FIXED)

    def searched_bounds(self) -> Dict[str, Tuple[float, float]]:
        """Bounds of the 9 searched factors only (what an examiner takes)."""
        return {k: self._bounds[k] for k in SEARCHED}

    def sample(self, rng: np.random.Generator, n: int) -> List[Dict[str, float]]:
        """``n`` points drawn uniformly over all 12 factors (one vectorised draw, Table 1 order)."""
        if not isinstance(rng, np.random.Generator):
            raise ConfigError(f"sample: rng must be a numpy.random.Generator, got {type(rng).__name__}")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ConfigError(f"sample: n must be a non-negative int, got {n!r}")
        lo, hi = self.arrays()
        x = lo + rng.random((int(n), len(FACTORS))) * (hi - lo)
        return [dict(zip(FACTORS, map(float, row))) for row in x]

    def arrays(self) -> Tuple[np.ndarray, np.ndarray]:
        """(lo, hi) as float arrays in Table 1 order."""
        lo = np.array([self._bounds[f][0] for f in FACTORS])
        hi = np.array([self._bounds[f][1] for f in FACTORS])
        return lo, hi

    def clip(self, params: Mapping[str, float]) -> Dict[str, float]:
        """A copy of ``params`` with every known factor clipped into its bounds (other keys kept as they are)."""
        out = dict(params)
        for k, v in params.items():
            if k in self._bounds:
                lo, hi = self._bounds[k]
                out[k] = float(min(max(float(v), lo), hi))
        return out

    def validate(self, params: Mapping[str, float], *, require_all: bool = True) -> None:
        """Raise ConfigError naming the factor, its value and its bounds if a factor is missing, NaN or out of range.

        Keys that are not factors (``"class"``, ``"instance"``) are ignored.
        """
        if not isinstance(params, Mapping):
            raise ConfigError(f"scene params: expected a dict of factor -> value, got {type(params).__name__}")
        for name in FACTORS:
            if name not in params:
                if require_all:
                    raise ConfigError(f"scene params: factor {name!r} is missing; need all of {', '.join(FACTORS)}")
                continue
            lo, hi = self._bounds[name]
            try:
                v = float(params[name])
            except (TypeError, ValueError):
                raise ConfigError(f"scene params: factor {name!r} = {params[name]!r} is not a number") from None
            tol = 1e-9 * max(1.0, abs(lo), abs(hi))
            if not math.isfinite(v) or v < lo - tol or v > hi + tol:
                raise ConfigError(
                    f"scene params: factor {name!r} = {v!r} is outside its bounds [{lo}, {hi}] ({UNITS[name]})"
                )

    def corners(self, factors: Sequence[str]) -> List[Dict[str, float]]:
        """All 2**k corners over ``factors`` (others at their mid-point): the extreme scenes, for checks."""
        mid = {f: (lo + hi) / 2 for f, (lo, hi) in self._bounds.items()}
        out = []
        for mask in range(2 ** len(factors)):
            p = dict(mid)
            for i, f in enumerate(factors):
                p[f] = self._bounds[f][(mask >> i) & 1]
            out.append(p)
        return out

    def __repr__(self) -> str:
        changed = {k: v for k, v in self._bounds.items() if v != DEFAULT_BOUNDS[k]}
        return f"SceneSpace(bounds={changed or None})"
