import pytest
from pydantic import ValidationError

from weakspot.gad.config import GadParams
from weakspot.gad.search import SEARCHES


def test_paper_defaults():
    p = GadParams()
    assert (p.design_points, p.epochs, p.replicates, p.pool_size, p.budget) == (50_000, 20, 100, 250, 50)
    assert p.confidence_threshold == 0.65
    assert p.searches == SEARCHES.names()  # every registered search


def test_target_fields_are_gone_and_bad_values_are_rejected():
    for key in ("datasets", "keel_root", "estimator", "svm"):  # they belong to the targets now
        with pytest.raises(ValidationError, match="extra"):
            GadParams(**{key: None})
    with pytest.raises(ValidationError, match="extra"):
        GadParams(design_point=10)
    with pytest.raises(ValidationError, match="budget"):
        GadParams(budget=300, pool_size=250)
    with pytest.raises(ValidationError, match="unknown search.*valid: bansal_weld"):
        GadParams(searches=["gad", "magic"])
    with pytest.raises(ValidationError, match="distinct"):
        GadParams(searches=["gad", "gad"])
    with pytest.raises(ValidationError):
        GadParams(confidence_threshold=1.5)


def test_a_newly_registered_search_is_valid():
    from weakspot.registry import Registry

    assert isinstance(SEARCHES, Registry)
    name = "_test_first_k"
    if name not in SEARCHES:

        @SEARCHES.register(name)
        class FirstK:
            def __init__(self, *, random_state: int = 0):
                pass

            def select(self, pool, budget, oracle):
                import numpy as np

                return np.arange(budget)

    try:
        assert GadParams(searches=["gad", name]).searches == ["gad", name]
    finally:
        SEARCHES._items.pop(name, None)  # keep the registry as the other tests expect it


def test_split_seeds_and_the_r2_gate():
    p = GadParams()
    assert p.seeds == [0, 1, 2, 3, 4] and p.min_pseudo_r2 == 0.5 and p.design_data_fraction == 0.5
    assert GadParams(seeds=[3, 0, 1]).seeds == [0, 1, 3]
    with pytest.raises(ValidationError, match="must include 0"):
        GadParams(seeds=[1, 2])
    with pytest.raises(ValidationError, match="distinct"):
        GadParams(seeds=[0, 0])
    with pytest.raises(ValidationError, match="distinct offsets >= 0"):
        GadParams(seeds=[0, -1])
    with pytest.raises(ValidationError):
        GadParams(design_data_fraction=1.0)
    with pytest.raises(ValidationError):
        GadParams(min_pseudo_r2=2.0)
