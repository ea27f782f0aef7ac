"""ops.verdict.plots_diff: two recorded audits' curve files taken from the DVC cache by their own dvc.lock, and DVC's own
`dvc plots diff` rendering both (a planted cache and history: the answer is known)."""

import hashlib
import json

import pandas as pd
import pytest
import yaml

from ops.verdict.plots_diff import plot_file, plots_diff


def _cache(root, data: bytes) -> str:
    md5 = hashlib.md5(data).hexdigest()
    f = root / ".dvc/cache/files/md5" / md5[:2] / md5[2:]
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(data)
    return md5


def _audit(root, audit_id, curve: bytes):
    entry = _cache(root, curve)
    listing = json.dumps([{"md5": entry, "relpath": "curve.csv"}]).encode()
    dir_md5 = _cache(root, listing)
    f = root / ".dvc/cache/files/md5" / dir_md5[:2] / dir_md5[2:]
    f.rename(f.with_name(f.name + ".dir"))
    lock = {
        "schema": "2.0",
        "stages": {"robustness-digits": {"outs": [{"path": "plots/robustness/digits", "md5": dir_md5 + ".dir"}]}},
    }
    (root / "history").mkdir(exist_ok=True)
    (root / f"history/{audit_id}.dvc.lock").write_text(yaml.safe_dump(lock))
    pd.DataFrame(
        [
            {
                "audit_id": audit_id,
                "time": "t",
                "git_rev": "r",
                "git_dirty": False,
                "lock_sha256": "x",
                "metric": "m",
                "value": 1.0,
                "text": "",
            }
        ]
    ).to_parquet(root / f"history/{audit_id}.parquet")


@pytest.mark.pipeline  # dvc plots diff over two audits
def test_two_audits_curves_from_the_cache_drawn_by_dvc_plots_diff(tmp_path):
    before = b"eps,clean,pgd\n0.0,0.99,0.99\n0.1,0.99,0.34\n"
    after = b"eps,clean,pgd\n0.0,0.98,0.98\n0.1,0.98,0.40\n"
    _audit(tmp_path, "20261126T010000Z-aaaa", before)
    _audit(tmp_path, "20261126T020000Z-bbbb", after)
    (tmp_path / "dvc.yaml").write_text(
        yaml.safe_dump(
            {
                "plots": [
                    {"plots/robustness/digits/curve.csv": {"x": "eps", "y": ["clean", "pgd"]}},
                    {"plots/gad/phoneme/sdr_curve.csv": {"x": "query", "y": ["gad"]}},
                ]
            }
        )
    )
    lock = tmp_path / "history/20261126T010000Z-aaaa.dvc.lock"
    assert plot_file(tmp_path, lock, "plots/robustness/digits/curve.csv") == before
    assert plot_file(tmp_path, lock, "plots/gad/phoneme/sdr_curve.csv") is None  # not an output of that audit
    res = plots_diff("20261126T01", "20261126T02", tmp_path, out=tmp_path / "diff")
    html = (tmp_path / "diff/index.html").read_text()
    assert "plots/robustness/digits/curve.csv" in html
    assert "20261126T010000Z-aaaa" in html and "20261126T020000Z-bbbb" in html  # both audits drawn
    assert "0.34" in html and "0.4" in html  # each audit's numbers
    assert "cdn.jsdelivr" not in html and "vegaEmbed" in html  # Vega inlined: the page draws offline
    assert res["missing"] == [
        "plots/gad/phoneme/sdr_curve.csv (20261126T010000Z-aaaa)",
        "plots/gad/phoneme/sdr_curve.csv (20261126T020000Z-bbbb)",
    ]
