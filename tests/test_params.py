"""params.yaml validation: every bad input names the key, the value and what is allowed."""

from pathlib import Path

import pytest
import yaml

import tasks.settings  # noqa: F401  (the repository's params.yaml holds the operations' sections: history, execution)
from weakspot.config import check_params, deep_merge, load_section, load_target, read_yaml, validate_section
from weakspot.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_the_library_alone_does_not_know_the_operations_sections_and_ops_params_registers_them(tmp_path):
    """weakspot.config knows the library's sections and every method's; ``history``, ``gates`` and ``execution`` are
    registered by the operations package when tasks.settings is imported (weakspot check and audit, the report stage,
    tasks/runner.py)."""
    import subprocess
    import sys

    code = (
        "from weakspot.config import section_names; a = set(section_names()); import tasks.settings; "
        "b = set(section_names()); print(sorted(a & {'history', 'execution', 'gates'}), sorted(b - a))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[-2] == "[] ['execution', 'gates', 'history']"


def _write(tmp_path, data) -> Path:
    p = tmp_path / "params.yaml"
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def test_repository_params_are_valid():
    params = check_params(ROOT / "params.yaml")
    assert params["targets"]["digits"]["data"]["source"] == "digits"
    assert params["device"] in ("auto", "cpu", "cuda")


def test_every_profile_is_valid_when_merged(tmp_path):
    base = read_yaml(ROOT / "params.yaml")
    for prof in sorted((ROOT / "profiles").glob("*.yaml")):
        merged = deep_merge(base, read_yaml(prof))
        check_params(_write(tmp_path, merged))


def test_malformed_yaml_names_file_and_line(tmp_path):
    p = _write(tmp_path, "targets:\n  digits:\n    data: {fractions: [0.7, 0.15}\n")
    with pytest.raises(ConfigError, match=r"malformed YAML at line \d+"):
        read_yaml(p)


def test_missing_params_file(tmp_path):
    with pytest.raises(ConfigError, match="params file not found"):
        read_yaml(tmp_path / "nope.yaml")


def test_unknown_key_is_an_error_listing_allowed_keys(tmp_path):
    p = _write(tmp_path, {"targets": {"digits": {"train": {"epoch": 3}}}})
    with pytest.raises(ConfigError) as exc:
        load_target("digits", p)
    msg = str(exc.value)
    assert "unknown key 'targets.digits.train.epoch'" in msg and "epochs" in msg and "(value 3)" in msg


def test_unknown_nested_key_lists_the_nested_allowed_keys(tmp_path):
    p = _write(tmp_path, {"targets": {"digits": {"model": {"kinda": "torch"}}}})
    with pytest.raises(ConfigError, match=r"unknown key 'targets.digits.model.kinda'.*kind, factory, weights, arch"):
        load_target("digits", p)


def test_unknown_top_level_section(tmp_path):
    p = _write(tmp_path, {"prepair": {}})
    with pytest.raises(ConfigError, match=r"unknown key 'prepair'; allowed top-level keys: .*targets"):
        check_params(p)


def test_wrong_type_names_key_value_and_rule(tmp_path):
    p = _write(tmp_path, {"targets": {"digits": {"train": {"epochs": "many"}}}})
    with pytest.raises(ConfigError, match=r"targets.digits.train.epochs = 'many': Input should be a valid integer"):
        load_target("digits", p)


def test_out_of_range_value(tmp_path):
    p = _write(tmp_path, {"targets": {"digits": {"train": {"lr": -1}}}})
    with pytest.raises(ConfigError, match=r"targets.digits.train.lr = -1: Input should be greater than 0"):
        load_target("digits", p)


def test_bad_device_lists_allowed(tmp_path):
    p = _write(tmp_path, {"device": "tpu"})
    with pytest.raises(ConfigError, match="device = 'tpu': allowed: auto, cpu, cuda"):
        load_section("report", p)


@pytest.mark.parametrize("threads", [0, -2, 1.5, "four", True])
def test_bad_threads_is_named(tmp_path, threads):
    p = _write(tmp_path, {"threads": threads})
    with pytest.raises(ConfigError, match=r"threads = .*: must be a whole number of CPU threads, 1 or more"):
        load_section("report", p)


@pytest.mark.pipeline  # runs a stage
def test_a_stage_runs_on_the_threads_params_yaml_pins(tmp_path):
    """Whatever the environment says and however many cores the machine has: params.yaml's ``threads`` (results
    depend on it), in the stage's process and in what it starts; and it is a param of every stage that computes."""
    import os
    import subprocess
    import sys

    from ops.engine.pipeline import stages
    from weakspot.config import read_yaml

    root = Path(__file__).resolve().parents[1]
    probe = "import flows, os, torch; print(torch.get_num_threads(), os.environ['MKL_NUM_THREADS'])"
    for threads, env_value in ((2, "1"), (1, "2"), (None, "2")):
        (tmp_path / "params.yaml").write_text("" if threads is None else f"threads: {threads}\n")
        env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": env_value, "MKL_NUM_THREADS": env_value}
        env.pop("WEAKSPOT_ROOT", None)
        out = subprocess.run(
            [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
        )
        want = threads or 1
        assert out.stdout.split() == [str(want), str(want)], out
        assert f"OMP_NUM_THREADS={env_value} in the environment ignored" in out.stderr
    # a malformed params.yaml is the stage's own error to name (exit 2, tests/test_pipeline.py), not the import's
    (tmp_path / "params.yaml").write_text("targets:\n  digits: {train: {epochs: [3}\n")
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("WEAKSPOT_ROOT", None)
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == ["1", "1"], out.stderr[-2000:]
    dvc = stages(read_yaml(root / "params.yaml"))
    computing = [
        s
        for s in dvc
        if s.split("-")[0] in ("train", "render", "examine_study") or "-" in s and not s.startswith("prepare-")
    ]
    assert len(computing) > 10
    for name in computing:
        assert "threads" in dvc[name]["params"], name


def test_fractions_must_sum_to_one(tmp_path):
    p = _write(tmp_path, {"targets": {"digits": {"data": {"fractions": [0.5, 0.2, 0.2]}}}})
    with pytest.raises(ConfigError, match="summing to 1"):
        load_target("digits", p)


def test_check_reports_every_bad_section_at_once(tmp_path):
    p = _write(tmp_path, {"targets": {"digits": {"data": {"seed": "x"}}}, "report": {"titel": "x"}})
    with pytest.raises(ConfigError) as exc:
        check_params(p)
    assert "targets.digits.data.seed" in str(exc.value) and "report.titel" in str(exc.value)


def test_a_stage_ignores_other_sections(tmp_path):
    # each stage validates only its own section: a typo in `report` must not stop a target's stages
    p = _write(tmp_path, {"report": {"titel": "x"}, "targets": {"digits": {"data": {"seed": 3}}}})
    top, t = load_target("digits", p)
    assert t.data.seed == 3 and top["device"] == "auto"


def test_unknown_target_lists_the_targets(tmp_path):
    p = _write(tmp_path, {"targets": {"digits": {}, "phoneme": {"data": {"source": "keel:phoneme"}}}})
    with pytest.raises(ConfigError, match="no target 'digts'; targets: digits, phoneme"):
        load_target("digts", p)


def test_bad_target_name(tmp_path):
    p = _write(tmp_path, {"targets": {"my model": {}}})
    with pytest.raises(ConfigError, match="target name 'my model'"):
        check_params(p)


def test_missing_section_gets_defaults():
    sec = validate_section("report", {})
    assert sec.title == "weakspot audit"


def test_deep_merge_is_recursive():
    assert deep_merge({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"b": 5}}) == {"a": {"b": 5, "c": 2}, "d": 1}


def test_a_methods_per_target_overrides_apply_to_that_target_only(tmp_path):
    from weakspot.methods import available

    method = sorted(available())[0]
    p = _write(tmp_path, {"targets": {"a": {}, "b": {}}, method: {"seed": 3, "per_target": {"a": {"seed": 7}}}})
    assert load_section(method, p, target="a")[1].seed == 7
    assert load_section(method, p, target="b")[1].seed == 3
    assert load_section(method, p)[1].seed == 3
    assert check_params(p)[method]["per_target"] == {"a": {"seed": 7}}


def test_per_target_errors_name_the_target_and_key(tmp_path):
    from weakspot.methods import available

    method = sorted(available())[0]
    p = _write(tmp_path, {"targets": {"a": {}}, method: {"per_target": {"zz": {"seed": 1}}}})
    with pytest.raises(ConfigError, match=rf"{method}.per_target: no target 'zz'; targets: a"):
        check_params(p)
    p = _write(tmp_path, {"targets": {"a": {}}, method: {"per_target": {"a": {"sed": 1}}}})
    with pytest.raises(ConfigError, match=rf"unknown key '{method}.per_target.a.sed'"):
        load_section(method, p, target="a")
    p = _write(tmp_path, {"targets": {"a": {}}, "report": {"per_target": {"a": {}}}})
    with pytest.raises(ConfigError, match="unknown key 'report.per_target'"):
        load_section("report", p)
