"""weakspot.intrinsic.surface: the decision surfaces of Sec. 3 (Eq. 1-3, Figs. 2-4) on models whose answer is known."""

import numpy as np
import pytest
import torch

from weakspot.errors import ConfigError
from weakspot.intrinsic.surface import DIRECTIONS, decision_surfaces, direction


def _linear(w0, w1, b=(0.0, 0.0)):
    m = torch.nn.Linear(len(w0), 2)
    with torch.no_grad():
        m.weight.copy_(torch.tensor(np.array([w0, w1]), dtype=torch.float32))
        m.bias.copy_(torch.tensor(b, dtype=torch.float32))
    return m.eval()


def test_surface_of_a_linear_model_crosses_the_boundary_where_the_algebra_says():
    """Two-class linear model: along the FGSM sign direction g falls by ||w_1 - w_0||_1 per unit, so on the a = 0
    column the boundary g = 0 is at b* = g(x) / ||w_1 - w_0||_1; g at the centre is the logit margin."""
    rng = np.random.default_rng(0)
    w0, w1 = rng.normal(size=6), rng.normal(size=6)
    m = _linear(w0, w1)
    x = rng.uniform(0.3, 0.7, 6).astype(np.float32)
    z = m(torch.as_tensor(x[None])).detach().numpy()[0]
    y = int(np.argmax(z))
    g0 = z[y] - z[1 - y]
    bstar = g0 / np.abs(w1 - w0).sum()
    eps = bstar / 1.5  # the boundary lies inside the plotted span (2 eps), outside the eps square
    surf = decision_surfaces(m, x, y, eps=eps, grid=201, span=2.0, seed=0)
    assert [s.direction for s in surf] == list(DIRECTIONS)
    fg = surf[1]
    c = len(fg.a) // 2
    assert fg.a[c] == pytest.approx(0.0, abs=1e-6)
    assert fg.g[c, c] == pytest.approx(g0, rel=1e-4)
    col = fg.g[:, c]
    cross = fg.b[np.flatnonzero(col <= 0)]
    assert cross.size and cross.min() == pytest.approx(bstar, abs=(fg.b[1] - fg.b[0]) * 1.01)
    # the C&W direction of a two-class linear model is the same sign vector
    np.testing.assert_allclose(surf[3].g, fg.g, rtol=1e-5, atol=1e-5)
    # Fig. 2's arrows: the FGSM direction is the steepest L-inf descent of g, so any other sign direction (the random
    # one) crosses the boundary no nearer (|dw . r| <= ||dw||_1)
    assert fg.boundary_distance() == pytest.approx(bstar, abs=(fg.b[1] - fg.b[0]) * 1.01)
    assert surf[0].boundary_distance() >= fg.boundary_distance()


def test_surfaces_are_seeded_and_span_the_asked_square():
    rng = np.random.default_rng(1)
    m = _linear(rng.normal(size=5), rng.normal(size=5))
    x = rng.uniform(0.2, 0.8, 5).astype(np.float32)
    a = decision_surfaces(m, x, 0, eps=0.1, grid=11, span=3.0, seed=4, directions=("random",))
    b = decision_surfaces(m, x, 0, eps=0.1, grid=11, span=3.0, seed=4, directions=("random",))
    c = decision_surfaces(m, x, 0, eps=0.1, grid=11, span=3.0, seed=5, directions=("random",))
    assert np.array_equal(a[0].g, b[0].g) and not np.array_equal(a[0].g, c[0].g)
    assert a[0].g.shape == (11, 11) and a[0].a[0] == pytest.approx(-0.3) and a[0].b[-1] == pytest.approx(0.3)


def test_a_direction_is_an_l_inf_unit_sign_vector_and_an_unknown_one_is_an_error():
    m = _linear([1.0, -2.0, 0.5], [0.0, 1.0, 1.0])
    x = torch.full((1, 3), 0.5)
    gen = torch.Generator().manual_seed(0)
    for kind in DIRECTIONS:
        d = direction(m, x, 0, kind, gen)
        assert d.shape == x.shape and set(d.abs().unique().tolist()) == {1.0}
    # FGSM raises the cross-entropy of class 0: it moves along sign(w_1 - w_0)
    torch.testing.assert_close(direction(m, x, 0, "fgsm", gen)[0], torch.tensor([-1.0, 1.0, 1.0]))
    with pytest.raises(ConfigError, match="direction 'diagonal' is not known; valid: random, fgsm, ll_fgsm, cw"):
        direction(m, x, 0, "diagonal", gen)


def test_a_flat_gradient_falls_back_to_a_random_sign_direction():
    """A constant model has no input gradient; the FGSM direction is then a random sign vector, not zero."""
    flat = torch.nn.Sequential(torch.nn.Linear(4, 2))
    with torch.no_grad():
        flat[0].weight.zero_()
    d = direction(flat.eval(), torch.full((1, 4), 0.5), 0, "fgsm", torch.Generator().manual_seed(0))
    assert set(d.abs().unique().tolist()) == {1.0}
