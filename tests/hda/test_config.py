"""weakspot.hda.config: the hda section, its per-target settings and Table 1's radii."""

import pytest

from weakspot.hda.config import HdaParams, default_radius, radius_of


def test_params_per_target_radius_and_errors(tmp_path):
    import yaml

    from weakspot.config import load_section

    f = tmp_path / "params.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "targets": {"digits": {}, "scenes": {}},
                "hda": {
                    "n_seeds": 50,
                    "per_target": {"scenes": {"n_seeds": 10, "ga": {"generations": 5}, "radius": 0.02}},
                },
            }
        )
    )
    s = load_section("hda", f, target="scenes")[1]
    assert s.n_seeds == 10 and s.ga.generations == 5 and s.ga.population == HdaParams().ga.population
    assert s.radius == 0.02 and radius_of(s, 1, (0.0, 1.0)) == 0.02
    d = load_section("hda", f, target="digits")[1]
    assert d.n_seeds == 50 and radius_of(d, 1, (0.0, 1.0)) == 0.1
    f.write_text(
        yaml.safe_dump({"targets": {"scenes": {}}, "hda": {"per_target": {"scenes": {"ga": {"generatoins": 5}}}}})
    )
    with pytest.raises(ValueError, match="hda.per_target.scenes.ga.generatoins"):
        load_section("hda", f, target="scenes")
    with pytest.raises(ValueError, match="radius"):
        HdaParams.model_validate({"radius": -1})
    assert default_radius(1, 0.0, 1.0) == 0.1 and default_radius(3, 0.0, 1.0) == 0.03


def test_depth_is_audit_by_default_and_study_on_one_target(tmp_path):
    import yaml

    from weakspot.config import check_params, load_section

    assert HdaParams().depth == "audit"
    f = tmp_path / "params.yaml"
    f.write_text(
        yaml.safe_dump({"targets": {"digits": {}, "scenes": {}}, "hda": {"per_target": {"digits": {"depth": "study"}}}})
    )
    assert load_section("hda", f, target="digits")[1].depth == "study"
    assert load_section("hda", f, target="scenes")[1].depth == "audit"
    assert check_params(f)["hda"]["depth"] == "audit"
    f.write_text(yaml.safe_dump({"targets": {"digits": {}}, "hda": {"per_target": {"digits": {"depth": "paper"}}}}))
    with pytest.raises(ValueError, match="hda.per_target.digits.depth"):
        load_section("hda", f, target="digits")
