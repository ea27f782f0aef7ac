import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from weakspot.corner.config import CornerParams


def test_defaults_are_the_papers_where_it_gives_numbers():
    p = CornerParams()
    assert (p.steps, p.lr, p.fgsm_eps) == (50, 0.001, 0.25)  # Sec. 4.3, Sec. 4.5
    assert p.resolved_latent_dim(1) == 2 and p.resolved_latent_dim(3) > 2  # Sec. 4.1 (2-D MNIST code)
    assert not p.uses_discriminator(1) and p.uses_discriminator(3)
    assert CornerParams(latent_dim=5).resolved_latent_dim(1) == 5
    assert CornerParams(discriminator=True).uses_discriminator(1)


def test_every_default_is_cited_or_marked_ours():
    src = Path(__file__).resolve().parents[2].joinpath("weakspot/corner/config.py").read_text()
    body = src[src.index("class CornerParams") : src.index("@field_validator")]
    for line in body.splitlines():
        m = re.match(r"\s+(\w+): .*=", line)
        if m and not line.strip().startswith("#"):
            i = body.splitlines().index(line)
            context = "\n".join(body.splitlines()[max(0, i - 3) : i + 1])
            assert "Sec." in context or "ours" in context, f"{m.group(1)}: no citation"


@pytest.mark.parametrize(
    "bad",
    [
        {"nope": 1},
        {"latent_dim": 0},
        {"latent_dim": "big"},
        {"lr": 0},
        {"kde_bandwidth": -1.0},
        {"channels": [8, 8, 8]},
        {"boundary_margin": 1.5},
    ],
)
def test_bad_params_are_refused(bad):
    with pytest.raises(ValidationError):
        CornerParams(**bad)
