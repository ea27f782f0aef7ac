"""The examination engine on a world whose answer is known: an image is its scene's |view_elevation| and class 0's
probability is 1 - |elevation| / 90, so every number a session keeps can be recomputed from its queries."""

import numpy as np
import pytest

from weakspot.errors import DataError
from weakspot.examine.inputs import examined_model
from weakspot.examine.sessions import group, make_sessions, run_sessions, searched_bounds
from weakspot.scene.space import SceneSpace

from .examine_helpers import ElevationModel, ElevationRenderer, tiny_params


def _p(queries):
    return 1.0 - np.rint(np.abs([q["view_elevation"] for q in queries])) / 90.0


def _world(T=6, examiners=("random", "bo", "rl"), mode="weakness", **kw):
    space = SceneSpace()
    params = tiny_params(T=T, checkpoints=[0, T], examiners=list(examiners), n_random=5, tail=7, **kw)
    models = {"m": examined_model(ElevationModel(), ["flat", "tall"])}
    sessions = make_sessions(
        params, space, models, {"m": {"flat": 3}}, ["flat"], "main", "m", list(examiners), T, mode=mode
    )
    return space, params, models, sessions


def test_sessions_keep_what_they_saw_and_their_worst_scene():
    space, params, models, sessions = _world()
    r, calls = ElevationRenderer(), []
    run_sessions(sessions, r, models, chunk=5, progress=lambda w, d, n: calls.append((w, d, n)))
    assert r.calls >= params.T and calls[-1] == ("examine", calls[-1][2], calls[-1][2])
    assert calls[-1][2] == sum(s.T * s.batch for s in sessions)
    for s in sessions:
        assert len(s.probs) == len(s.params) == s.T and not s.active
        for q, p in zip(s.params, s.probs):
            assert len(q) == s.batch and np.allclose(p, _p(q))  # the true class's probability of each query
        flat = [q for qs in s.params for q in qs]
        assert list(s.tail_params) == flat[-s.tail :] and len(s.tail_images) == min(s.tail, len(flat))
        assert np.allclose(list(s.tail_probs), _p(flat)[-s.tail :])
        assert s.worst[0] == pytest.approx(min(np.concatenate(s.probs)))  # weakness: the lowest
        assert s.worst_pred[0] == int(s.worst[0] < 0.5) and s.worst_pred[1] == pytest.approx(
            max(s.worst[0], 1 - s.worst[0])
        )
        assert s.curve() == pytest.approx([p.mean() for p in s.probs])
        assert s.at(s.T, 2) == pytest.approx(np.concatenate(s.probs[-2:]).mean())
        assert s.sun == sessions[0].sun and all(space.bounds[k][0] <= v <= space.bounds[k][1] for k, v in s.sun.items())
        assert (s.length_scales is not None) == (s.examiner_name == "bo")
    assert [s.examiner_name for s in sessions] == ["random", "bo", "rl", "t0"]
    t0 = group(sessions, "main_t0")[0]
    assert (t0.T, t0.batch, t0.instance) == (1, params.n_random, 3)


def test_strength_mode_keeps_the_highest():
    _, _, models, sessions = _world(examiners=("bo",), mode="strength")
    run_sessions(sessions, ElevationRenderer(), models, chunk=100, progress=None)
    s = group(sessions, "main", examiner="bo")[0]
    assert s.worst[0] == pytest.approx(max(np.concatenate(s.probs)))


def test_the_same_params_give_the_same_sessions():
    runs = []
    for _ in range(2):
        _, _, models, sessions = _world()
        run_sessions(sessions, ElevationRenderer(), models, chunk=512, progress=None)
        runs.append([np.concatenate(s.probs) for s in sessions])
    assert all(np.array_equal(a, b) for a, b in zip(*runs))


def test_every_round_is_one_render_call_in_lockstep():
    _, params, models, sessions = _world(T=4)
    r = ElevationRenderer()
    run_sessions(sessions, r, models, chunk=10_000, progress=None)
    assert r.calls == params.T  # the T = 0 session's one round rides along with the first


def test_a_renderer_that_returns_too_few_images_is_a_data_error():
    _, _, models, sessions = _world(T=2)

    class Short(ElevationRenderer):
        def render(self, scenes):
            return super().render(scenes)[:-1]

    with pytest.raises(DataError, match="renderer returned shape"):
        run_sessions(sessions, Short(), models, chunk=512, progress=None)


def test_group_and_bounds():
    space, _, _, sessions = _world()
    assert [s.examiner_name for s in group(sessions, "main")] == ["random", "bo", "rl"]
    assert [s.examiner_name for s in group(sessions, "main", examiner="bo")] == ["bo"]
    assert group(sessions, "main", model="other") == []
    assert list(searched_bounds(space)) == list(space.searched)
