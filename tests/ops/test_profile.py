"""ops.profile (``weakspot profile NAME``): the repository's profiles merged into a copy of its params.yaml keep every
comment in place and give exactly ``deep_merge(params, profile)``; a profile that fails validation leaves params.yaml
byte-identical."""

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from ops.profile import apply_profile
from weakspot.config import deep_merge, read_yaml
from weakspot.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
HEADER = re.compile(r"^profile \S+ merged in by `weakspot profile`; previous file: ")


def _comments(text: str) -> Counter:
    """Every comment's text (a ``#`` at a line's start or after a blank, outside quotes), counted."""
    out = Counter()
    for line in text.splitlines():
        quote = None
        for i, ch in enumerate(line):
            if quote:
                quote = None if ch == quote else quote
            elif ch in "'\"" and (i == 0 or line[i - 1] in " [{,:"):
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
                out[line[i + 1 :].strip()] += 1
                break
    return out


def _blocks(text: str) -> dict:
    """The full-line comments right above each top-level key (a section's header), by key."""
    out, above = {}, []
    for line in text.splitlines():
        if line.startswith("#"):
            above.append(line)
        elif re.match(r"^[A-Za-z_]\w*:", line):
            out[line.split(":")[0]], above = above, []
        elif line.strip():
            above = []
    return out


def _checkout(tmp_path: Path, *names: str) -> Path:
    shutil.copyfile(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "profiles").mkdir()
    for name in names:
        shutil.copyfile(ROOT / "profiles" / f"{name}.yaml", tmp_path / "profiles" / f"{name}.yaml")
    return tmp_path / "params.yaml"


@pytest.mark.parametrize("name", ["paper", "smoke"])
def test_repository_profile_keeps_every_comment_and_merges_exactly(tmp_path, name):
    params = _checkout(tmp_path, name)
    before = params.read_text()
    backup = apply_profile(name, params, tmp_path / "profiles")
    after = params.read_text()

    got = _comments(after)
    headers = [c for c in got if HEADER.match(c)]
    assert headers == [f"profile {name} merged in by `weakspot profile`; previous file: {backup}"]
    assert after.startswith(f"# {headers[0]}\n")
    del got[headers[0]]
    assert got == _comments(before)  # every comment, as often as before (none lost, none added)
    assert len(_comments(before)) > 100
    # ... and each section's header comments still right above its key (keys appended at a mapping's end go before
    # the next section's comments, not after them)
    assert _blocks(after) == {
        k: v if k != list(_blocks(before))[0] else [f"# {headers[0]}"] + v for k, v in _blocks(before).items()
    }
    # the merged values, exactly: the round trip changes nothing but what the profile sets
    profile = read_yaml(tmp_path / "profiles" / f"{name}.yaml")
    assert read_yaml(params) == deep_merge(read_yaml(ROOT / "params.yaml"), profile)
    assert list(read_yaml(params))[: len(read_yaml(ROOT / "params.yaml"))] == list(read_yaml(ROOT / "params.yaml"))
    assert backup.read_text() == before


def test_values_change_in_place_flow_style_kept_line_comments_kept(tmp_path):
    params = _checkout(tmp_path, "paper")
    apply_profile("paper", params, tmp_path / "profiles")
    lines = params.read_text().splitlines()
    # a flow mapping the profile changes a key of stays one flow line, its comment on it
    assert "  vae: {latent_dim: 8, hidden: 64, epochs: 100, max_steps: 100000}" in lines
    assert any(re.match(r"^  T: 500 +# iterations \(paper: 500\)", line) for line in lines)
    assert any(re.match(r"^  seeds: \[0, 1, 2, 3, 4, 5, 6, 7, 8, 9\] +# split / black-box", line) for line in lines)
    # per_target overrides merged into the nested mappings, a null set in a flow mapping
    assert "      vae: {latent_dim: 16, max_steps: 100000}" in lines
    assert "      coverage: {iterations: null}" in lines
    assert any(re.match(r"^    classes: null +# of the order check", line) for line in lines)
    # a target the profile adds: appended after the last target, in the profile's style
    i = lines.index("  yeast1:")
    assert lines[i - 1].startswith("    train: {epochs: 40, lr: 0.005, lr_schedule: constant")
    assert lines[i + 1] == '    data: {source: "keel:yeast1", bias: {preset: yeast1, seed: 0}}'


def test_nulls_and_per_target_overrides(tmp_path):
    params = _checkout(tmp_path)
    prof = tmp_path / "profiles" / "mine.yaml"
    prof.write_text(
        "hda:\n  radius: 0.2\n  per_target:\n"
        "    digits: {n_seeds: 10, radius: null, vae: {latent_dim: 4}}\n"
        "    scenes: {coverage: {iterations: 5}, fid: {epochs: 2}}\n"
        "corner:\n  train_sample: null\nexamine:\n  classes: null\n  bo: {min_length_scale: null}\n"
        "  study: {full_model: null}\n"
    )
    before = params.read_text()
    apply_profile("mine", params, tmp_path / "profiles")
    after = params.read_text()
    assert read_yaml(params) == deep_merge(read_yaml(ROOT / "params.yaml"), read_yaml(prof))
    got = _comments(after)
    del got[next(c for c in got if HEADER.match(c))]
    assert got == _comments(before)
    lines = after.splitlines()
    assert any(re.match(r"^  radius: 0\.2 +# L-inf radius", line) for line in lines)
    assert "  bo: {kappa: 0.5, objective: logit, ard: true, min_length_scale: null}" in lines
    assert any(re.match(r"^    full_model: null +# the scenes target's model", line) for line in lines)
    assert "    digits: {n_seeds: 10, radius: null, vae: {latent_dim: 4}}" in lines
    assert "      coverage: {iterations: 5}" in lines
    assert any(re.match(r"^      fid: \{train: 2000, epochs: 2\} +# CPU budget", line) for line in lines)
    assert any(re.match(r"^  classes: null( +#.*)?$", line) for line in lines) and "  train_sample: null" in lines


def test_profile_twice_keeps_one_header(tmp_path):
    params = _checkout(tmp_path, "smoke", "paper")
    apply_profile("smoke", params, tmp_path / "profiles")
    backup = apply_profile("paper", params, tmp_path / "profiles")
    headers = [c for c in _comments(params.read_text()) if HEADER.match(c)]
    assert headers == [f"profile paper merged in by `weakspot profile`; previous file: {backup}"]
    assert HEADER.match(backup.read_text().splitlines()[0][2:])  # the .bak: the smoke merge, its header
    base = deep_merge(read_yaml(ROOT / "params.yaml"), read_yaml(ROOT / "profiles/smoke.yaml"))
    assert read_yaml(params) == deep_merge(base, read_yaml(ROOT / "profiles/paper.yaml"))


@pytest.mark.parametrize(
    "text, match",
    [
        ("targets:\n  digits:\n    train: {epoch: 3}\n", "epoch"),  # an unknown key
        ("gad:\n  seeds: many\n", "seeds"),  # a wrong type
        ("- a list\n", "mapping"),  # not a mapping
    ],
)
def test_a_profile_that_fails_validation_leaves_params_byte_identical(tmp_path, text, match):
    params = _checkout(tmp_path)
    (tmp_path / "profiles" / "bad.yaml").write_text(text)
    before = params.read_bytes()
    with pytest.raises(ConfigError, match=match):
        apply_profile("bad", params, tmp_path / "profiles")
    assert params.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml", "profiles"]  # no .bak, no candidate left


def test_missing_profile_names_the_available_ones(tmp_path):
    params = _checkout(tmp_path, "smoke", "paper")
    before = params.read_bytes()
    with pytest.raises(ConfigError, match=r"profile 'gpu' not found at .*; available: paper, smoke"):
        apply_profile("gpu", params, tmp_path / "profiles")
    assert params.read_bytes() == before


def test_a_value_the_round_trip_cannot_write_in_place_still_merges(tmp_path, capsys):
    """A block list emptied to [] is written with the values (the comments go: the backup keeps them), not refused."""
    import yaml

    from ops.profile import apply_profile

    (tmp_path / "profiles").mkdir()
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    (tmp_path / "profiles/empty.yaml").write_text("gates: {conditions: []}\n")
    apply_profile("empty", params, tmp_path / "profiles")
    assert yaml.safe_load(params.read_text())["gates"]["conditions"] == []
    assert "# Gates:" in (tmp_path / "params.yaml.bak").read_text()
