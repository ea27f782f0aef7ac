"""The examiner's card on a user's classifier with its own class names (class_map onto the fake world's classes: no
Blender), rendered by the report's own template and CSS: docs/img/examiner-user-names.png (issue 47).

    python benchmarks/shot_examiner_names.py OUT.html
    chromium --headless --no-sandbox --screenshot=out.png --window-size=1200,1000 file://$PWD/OUT.html
"""

import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
import torch  # noqa: E402

from examine.examine_helpers import CLASSES, tiny_params, train_target  # noqa: E402
from weakspot.examine.fake import FakeRenderer, fake_dataset  # noqa: E402
import weakspot.examine.run as run_module  # noqa: E402
from weakspot.findings import correct_targets, normalise  # noqa: E402
from weakspot.methods import AuditTarget, SceneData, run_method  # noqa: E402
from weakspot.report.html import weak_spots_html  # noqa: E402
from weakspot.runtime import Runtime  # noqa: E402
from weakspot.scene.space import SceneSpace  # noqa: E402

torch.set_num_threads(1)
space = SceneSpace()
r = FakeRenderer(classes=CLASSES, resolution=24)
images, meta = fake_dataset(r, space, instances_per_class=8, views_per_instance=10, val_instances=2)
clf = train_target(images, meta)
run_module.renderer_for = lambda s, device="auto": FakeRenderer(classes=CLASSES, resolution=24)
mine = ["plate", "tile", "sail", "plus"]  # the user's own names for disc, square, triangle, cross
target = AuditTarget(
    name="my_shapes",
    model=clf,
    classes=mine,
    test=None,
    scene=SceneData(images=images, table=meta, settings={"resolution": 24}),
    params=SimpleNamespace(class_map=dict(zip(mine, CLASSES))),
)
out = run_method("examine", target, tiny_params(T=30, classes=None), Runtime(device="cpu"))
entry = {
    "name": "my_shapes",
    "intro": "A user's CNN with its own class names (class_map onto the scene's classes).",
    "methods": [
        {
            "name": "examine",
            "title": "The examiner (rendered scenes)",
            "paper": "seeds/000",
            "anchor": "examine-my_shapes",
            "findings": normalise(out.findings),
            "sample": "",
        }
    ],
}
correct_targets([entry])
css = (ROOT / "weakspot/report/templates/report.css").read_text()
html = f"<html><head><meta charset='utf-8'><style>{css}</style></head><body>{weak_spots_html(entry)}</body></html>"
Path(sys.argv[1] if len(sys.argv) > 1 else "examiner-user-names.html").write_text(html)
print(out.findings[["weak_spot", "label", "prediction", "confirmed"]].head(8).to_string())
