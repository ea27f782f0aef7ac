"""weakspot.hda.result: what HDA measured, one dataclass per research question."""

from weakspot.hda.result import HdaResult


def test_white_box_means_the_gradient_indicator_ran(toy):
    white, black = toy["white"][0], toy["black"][0]
    assert isinstance(white, HdaResult) and white.white_box and white.seeds.gradient is not None
    assert not black.white_box and black.adversarial is None and black.finetuning is None
    assert white.classes == ["a", "b", "c"] and white.radius == 0.1 and white.clip == (0.0, 1.0)
