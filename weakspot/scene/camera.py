"""Where the camera and the point light stand: positions on a sphere around the object, and the camera's pose.

Caveats first: angles are in degrees, distances in Blender units, the object sits at the origin; the camera's up
vector is the direction of increasing elevation, so the pose is defined and continuous everywhere, straight above and
below included (elevation +-90 degrees), where a world-up "look-at" would be singular. Pure numpy: no Blender.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Table 1: the viewpoint (r_v, A_v, U_v, theta_v) and the point light (r_l, A_l, U_l).

Example
-------
>>> import numpy as np
>>> m = camera_matrix(2.0, 30.0, 45.0, 0.0)
>>> bool(np.isclose(np.linalg.norm(m[:3, 3]), 2.0))
True
>>> [round(v, 6) for v in spherical(1.0, 90.0, 0.0)]
[0.0, 1.0, 0.0]
"""

from __future__ import annotations

import math
from typing import Tuple

import numpy as np

#: Camera lens: Blender's default 50 mm on a 36 mm sensor (39.6 degrees field of view).
LENS_MM = 50.0
SENSOR_MM = 36.0


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
    """Cartesian ``(x, y, z)`` of the point at ``distance`` from the origin, at that azimuth and elevation."""
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    return (distance * math.cos(el) * math.cos(az), distance * math.cos(el) * math.sin(az), distance * math.sin(el))
