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
    """Each field of CornerParams, with its comment on the lines of its statement (a formatter may wrap it) or on the
    three lines above, cites the paper (Sec.) or says it is ours."""
    import ast

    src = Path(__file__).resolve().parents[2].joinpath("weakspot/corner/config.py").read_text()
    lines = src.splitlines()
    cls = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == "CornerParams")
    fields = [n for n in cls.body if isinstance(n, ast.AnnAssign) and n.value is not None]
    assert len(fields) > 10
    for f in fields:
        context = "\n".join(lines[max(0, f.lineno - 4) : f.end_lineno])
        assert "Sec." in context or "ours" in context, f"{f.target.id}: no citation"


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
