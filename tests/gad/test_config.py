import pytest
from pydantic import ValidationError

from weakspot.gad.config import SEARCH_NAMES, BiasRuleParams, GadParams


def test_paper_defaults():
    p = GadParams()
    assert (p.design_points, p.epochs, p.replicates, p.pool_size, p.budget) == (50_000, 20, 100, 250, 50)
    assert p.confidence_threshold == 0.65
    assert [d.name for d in p.datasets] == ["phoneme", "yeast1", "breast_cancer"]
    assert tuple(p.searches) == SEARCH_NAMES


def test_unknown_key_and_bad_values_are_rejected():
    with pytest.raises(ValidationError, match="extra"):
        GadParams(design_point=10)
    with pytest.raises(ValidationError, match="budget"):
        GadParams(budget=300, pool_size=250)
    with pytest.raises(ValidationError, match="unknown search"):
        GadParams(searches=["gad", "magic"])
    with pytest.raises(ValidationError):
        GadParams(confidence_threshold=1.5)
    with pytest.raises(ValidationError, match="exactly one"):
        BiasRuleParams(feature="Iy", label=1, keep="above")
