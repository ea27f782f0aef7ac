"""tasks/headline.py: which metrics a stage's metrics file keeps for `dvc metrics show` (the rest go beside it)."""

from tasks.headline import LIMIT, flat_keys, select

GAD = {
    "phoneme": {
        "sdr": {"gad": 1.4, "random": 1.0},
        "budget": 50,
        "per_seed": {"3": {"sdr": {"gad": 2.0}}},
        "a.b": {"c": 1},
    }
}


def test_patterns_keep_the_nesting_and_drop_what_a_bang_pattern_names():
    out = select(GAD, ("*.sdr.gad", "*.budget", "!*.per_seed.*"))
    assert out == {"phoneme": {"sdr": {"gad": 1.4}, "budget": 50}}


def test_key_metrics_always_come_first_and_a_dotted_key_is_found():
    out = select(GAD, ("*.budget",), always=("phoneme.sdr.random", "nope"))
    assert flat_keys(out) == ["phoneme.sdr.random", "phoneme.budget"]
    assert select(GAD, ("phoneme.a.b.c",)) == {"phoneme": {"a.b": {"c": 1}}}


def test_without_patterns_a_small_file_is_whole_and_a_large_one_its_key_metrics():
    small = {f"k{i}": i for i in range(LIMIT)}
    assert select(small) == small
    large = {f"k{i}": i for i in range(LIMIT + 1)}
    assert select(large, always=("k3", "k1")) == {"k1": 1, "k3": 3}  # in the metrics' own order
    assert list(select(large)) == [f"k{i}" for i in range(LIMIT)]  # a plug-in without cards: its first keys
