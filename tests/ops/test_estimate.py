"""The audit's time estimate (ops/engine/estimate.py): its work counts follow what the params ask for, the wall time
follows the stage graph, and the last audit's times are found."""

from __future__ import annotations

import json

import pytest

from ops.engine import estimate as E


def _params(**sections):
    from weakspot.config import read_yaml

    data = read_yaml("params.yaml")
    for k, v in sections.items():
        data[k] = {**data.get(k, {}), **v}
    return data


def _work(data, stage):
    return E.stage_work([stage], data, threads=1)[0]


@pytest.fixture(scope="module")
def digits():
    """The digits target's probe (sizes and this machine's prices), once for the module."""
    from weakspot.config import read_yaml, target_of

    data = read_yaml("params.yaml")
    return E.probe_target(target_of("digits", data), data, 1)


def test_the_probe_reads_the_targets_sizes_without_preparing_it(digits):
    # scikit-learn's 1,797 digits, 70% for training (params.yaml's fractions), 8x8 grey images, 10 classes
    assert (digits.n_train, digits.n_train + digits.n_eval) == (1258, 1797)
    assert list(digits.shape) == [1, 8, 8] and digits.n_classes == 10
    assert digits.white and 0 < digits.fwd and 0 < digits.grad and 0 < digits.own


def test_work_is_proportional_to_what_the_params_ask_for(digits):
    """Twice the epochs, twice the training work (less the evaluation's); twice the GA's generations, about twice
    HDA's search; the study depth costs more than the audit depth, for every method that has one."""
    from weakspot.config import read_yaml, target_of, validate_section

    data = read_yaml("params.yaml")
    t = target_of("digits", data)
    t2 = t.model_copy(update={"train": t.train.model_copy(update={"epochs": 2 * t.train.epochs})})
    (w1, _), (w2, _) = E.work_train(digits, t, None), E.work_train(digits, t2, None)
    ev = digits.n_eval * digits.fwd
    assert (w2 - ev) == pytest.approx(2 * (w1 - ev))
    h = validate_section("hda", data, target="digits")
    h2 = h.model_copy(update={"ga": h.ga.model_copy(update={"generations": 2 * h.ga.generations + 1})})
    vae_etc = E.work_hda(digits, t, h.model_copy(update={"ga": h.ga.model_copy(update={"generations": -1})}))[0]
    assert E.work_hda(digits, t, h2)[0] - vae_etc == pytest.approx(2 * (E.work_hda(digits, t, h)[0] - vae_etc))
    for step, fn in (("hda", E.work_hda), ("intrinsic", E.work_intrinsic), ("robustness", E.work_robustness)):
        s = validate_section(step, data, target="digits")
        audit = fn(digits, t, s.model_copy(update={"depth": "audit"}))[0]
        study = fn(digits, t, s.model_copy(update={"depth": "study"}))[0]
        assert study > audit, step


def test_the_wall_time_follows_the_graph_and_the_slots():
    def w(stage, seconds):  # a step without coefficients: its work in seconds, after the overhead
        assert stage not in E.COSTS
        return E.StageWork(stage, stage, None, seconds - E.OVERHEAD, "")

    works = [w("a", 100), w("b", 50), w("c", 30)]
    chain = {"a": [], "b": ["a"], "c": ["b"]}
    free = {"a": [], "b": [], "c": []}
    assert E.wall_time(works, chain, 3, 3) == pytest.approx(180)  # one after the other, whatever the slots
    assert E.wall_time(works, free, 1, 4) == pytest.approx(180)  # one slot: the sum
    assert E.wall_time(works, free, 3, 2) == pytest.approx(100)  # 2 cores: a on one, b then c on the other
    assert E.wall_time(works, free, 3, 3) == pytest.approx(100)  # the longest


def test_the_last_audits_time_is_found_and_marked_when_its_work_was_the_same(tmp_path):
    for audit, secs, work in (("20260101T000000", 50.0, 3.0), ("20260102T000000", 60.0, 3.0)):
        rows = {"hda-digits": {"step": "hda", "target": "digits", "seconds": secs, "work": work, "counted": "x"}}
        (tmp_path / f"{audit}.stages.json").write_text(json.dumps({"audit": audit, "stages": rows}))
    same = E.StageWork("hda-digits", "hda", "digits", 3.0, "x")
    other = E.StageWork("hda-digits", "hda", "digits", 9.0, "x")
    new = E.StageWork("hda-other", "hda", "other", 3.0, "x")
    E.attach_last([same, other, new], tmp_path)
    assert (same.last, same.same_work) == (60.0, True)  # the newest audit's
    assert (other.last, other.same_work) == (60.0, False)
    assert new.last is None and "-" in E.table([new])


def test_every_stage_of_the_default_audit_gets_an_estimate():
    from weakspot.config import read_yaml

    from ops.engine.graph import stage_graph

    graph = stage_graph()
    works = E.stage_work(list(graph), read_yaml("params.yaml"), 1)
    assert [w.stage for w in works] == list(graph)
    assert all(w.seconds >= E.OVERHEAD and w.counted for w in works)
    # the scenes CNN trains on 10,000 renders for 15 epochs: more work than the digits LeNet's 1,258 images x 60
    by = {w.stage: w for w in works}
    assert by["train-scenes"].work > by["train-digits"].work


def test_the_examiners_study_counts_the_renders_and_epochs_of_its_experiments(digits):
    """The shared stage ``examine_study`` (depth study): the order check's three runs of T iterations per class with
    the T = 0 set, counted by hand on a small setting; the planted weakness adds its training set rendered again,
    its examinations and a model's epochs; the stage is priced on the scene target's probe, under a key of its own."""
    from weakspot.config import read_yaml, validate_section

    data = read_yaml("params.yaml")
    scene = validate_section("scene", data)
    study = {
        **data["examine"]["study"],  # m_study and the planted weakness off
        **{"order_check": True, "strength": False, "classes": ["can", "cap", "lamp"], "T": 10, "full_model": None},
    }
    s = validate_section("examine", {**data, "examine": {**data["examine"], "n_random": 50, "study": study}})
    w, counted = E.work_examine_study(digits, s, scene)
    assert counted.startswith(f"{3 * (50 + 3 * 10 * s.rl.batch_size)} renders, ")  # 3 x (50 + 3 x 10 x 8) = 870
    assert f"x {digits.n_train} images" in counted  # the full model, trained by the study (no full_model)
    aw = {"enabled": True, "T": 10, "tail": 5, "examiners": ["random"], "classes": ["can"]}
    s2 = validate_section(
        "examine",
        {**data, "examine": {**data["examine"], "n_random": 50, "study": {**study, "artificial_weakness": aw}}},
    )
    w2, counted2 = E.work_examine_study(digits, s2, scene)
    extra = digits.n_train + 1 * (10 * s2.random_batch + 50)
    assert counted2.startswith(f"{870 + extra} renders, ") and w2 > w
    priced = E.stage_work(["examine_study"], _params(examine={"depth": "study"}), 1)[0]
    assert priced.key == "examine_study" and "renders" in priced.counted and priced.work > 1
