"""The camera's pose and the point light's position: rotations looking at the origin, known positions."""

import numpy as np
import pytest

from weakspot.scene.camera import camera_matrix, spherical


def test_camera_matrix_is_a_rotation_looking_at_the_origin():
    for el in (-90.0, -30.0, 0.0, 45.0, 90.0):
        for roll in (0.0, 77.0):
            m = camera_matrix(2.0, 33.0, el, roll)
            r = m[:3, :3]
            assert np.allclose(r.T @ r, np.eye(3), atol=1e-12) and np.linalg.det(r) == pytest.approx(1.0)
            assert np.linalg.norm(m[:3, 3]) == pytest.approx(2.0)
            assert np.allclose(-r[:, 2], -m[:3, 3] / 2.0)  # the view axis (-z) points at the origin
    # continuous through the pole: no flip of the up vector between 89.9 and 90 degrees
    assert np.allclose(camera_matrix(2, 33, 89.99, 0)[:3, :3], camera_matrix(2, 33, 90.0, 0)[:3, :3], atol=1e-3)


def test_roll_turns_the_image_about_the_view_axis_only():
    a, b = camera_matrix(1.5, 20.0, 10.0, 0.0), camera_matrix(1.5, 20.0, 10.0, 90.0)
    assert np.allclose(a[:3, 2], b[:3, 2]) and np.allclose(a[:3, 3], b[:3, 3])  # same place, same view axis
    assert np.allclose(b[:3, 0], a[:3, 1]) and np.allclose(b[:3, 1], -a[:3, 0])  # x and y turned by 90 degrees


@pytest.mark.parametrize(
    "args, expected",
    [
        ((2.0, 0.0, 0.0), (2.0, 0.0, 0.0)),
        ((1.0, 90.0, 0.0), (0.0, 1.0, 0.0)),
        ((3.0, 45.0, 90.0), (0.0, 0.0, 3.0)),
        ((2.0, 180.0, -90.0), (0.0, 0.0, -2.0)),
    ],
)
def test_spherical_known_points(args, expected):
    assert np.allclose(spherical(*args), expected, atol=1e-12)


def test_the_camera_stands_where_spherical_puts_it():
    rng = np.random.default_rng(0)
    for d, az, el, roll in zip(
        rng.uniform(1, 3, 20), rng.uniform(0, 360, 20), rng.uniform(-90, 90, 20), rng.uniform(0, 360, 20)
    ):
        assert np.allclose(camera_matrix(d, az, el, roll)[:3, 3], spherical(d, az, el))
