"""What confirming the examiner's weak regions costs, against the examination it confirms, in the same run.

The examination (every examiner on every class, ``examine.repeats`` times) runs with the regions switched off; then
:func:`weakspot.examine.regions.find_regions` proposes and confirms the regions on the same sessions. Both are timed
and their renders counted through one counting renderer, so the ratio is measured side by side:

* renders: the examination's, and the confirmation's (``2 x regions.n_confirm`` per class with a region);
* seconds: each phase's wall time, and confirmation / examination.

The other methods confirm on predictions they already hold (segments, GAD's ranking, intrinsic's classes: a mask
and a score interval, no model query); this benchmark prints their share too, from the same clock.

Target: the pipeline's audited scene target (``--target scenes``, needs ``weakspot audit`` to have rendered and
trained it) with the Blender renderer, or ``--fake`` for the Blender-free fake world. Run:

    .venv/bin/python benchmarks/bench_confirm.py [--target scenes | --fake] [--T 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Counting:
    """A renderer that counts the scenes it renders."""

    def __init__(self, inner):
        self.inner, self.n = inner, 0

    def render(self, scenes):
        self.n += len(scenes)
        return self.inner.render(scenes)


def _fake():
    import torch

    from tests.examine.examine_helpers import CLASSES, train_target
    from weakspot.examine.fake import FakeRenderer, fake_dataset
    from weakspot.scene.space import SceneSpace

    space = SceneSpace()
    r = FakeRenderer(classes=CLASSES, resolution=24)
    images, meta = fake_dataset(r, space, instances_per_class=8, views_per_instance=10, val_instances=3)
    torch.set_num_threads(1)
    return r, space, train_target(images, meta), CLASSES, images, meta, None


def _pipeline(name: str):
    from tasks.method import load_audit_target
    from weakspot import methods
    from weakspot.scene.config import SceneParams
    from weakspot.scene.renderer import renderer_for

    t = load_audit_target(methods.get("examine"), name, None, "cpu")
    sp = SceneParams.model_validate(t.scene.settings)
    ctx = renderer_for(sp, device="cpu")
    return ctx.__enter__(), sp.space(), t.model, list(t.classes), t.scene.images, t.scene.table, ctx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="scenes")
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--T", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    args = ap.parse_args()

    from weakspot.config import load_section
    from weakspot.examine.config import ExamineParams
    from weakspot.examine.regions import find_regions
    from weakspot.examine.run import examine_target
    from weakspot.examine.sessions import render_scenes

    _, base = load_section("examine", "params.yaml")
    over = {k: v for k, v in (("T", args.T), ("repeats", args.repeats)) if v is not None}
    if "T" in over:
        over["checkpoints"] = [0, over["T"]]
    params = ExamineParams.model_validate(
        {**base.model_dump(), **over, "regions": {**base.regions.model_dump(), "enabled": False}}
    )
    if not args.fake and not os.path.isdir(f"data/targets/{args.target}/model"):
        print(f"no audited target {args.target!r} here (run `make audit` first): the fake world instead")
        args.fake = True
    renderer, space, model, classes, images, meta, ctx = _fake() if args.fake else _pipeline(args.target)
    if args.fake:  # the fake world's own classes
        params = params.model_copy(update={"classes": None, "tsne_class": None})
    counting = Counting(renderer)
    try:
        t = time.perf_counter()
        res = examine_target(counting, space, model, classes, images, meta, params)
        t_exam, n_exam = time.perf_counter() - t, counting.n
        from weakspot.examine.inputs import examined_model

        models = {"target": examined_model(model, classes)}
        t = time.perf_counter()
        regions = find_regions(
            res.sessions,
            space,
            meta,
            counting,
            models,
            base.regions,
            params.seed,
            lambda r, sc: render_scenes(r, sc, params.render_chunk),
        )
        t_conf, n_conf = time.perf_counter() - t, counting.n - n_exam
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    where = "fake world" if args.fake else f"target {args.target} (Blender)"
    print(
        f"examiner on {where}: T = {params.T}, {params.repeats} repeat(s), {len(set(s.cls for s in res.sessions))} "
        f"classes, regions.n_confirm = {base.regions.n_confirm}"
    )
    print(f"  examination : {n_exam:6d} renders  {t_exam:7.1f} s")
    print(
        f"  confirmation: {n_conf:6d} renders  {t_conf:7.1f} s   ({sum(r.rule is not None for r in regions)} regions,"
        f" {sum(r.confirmed for r in regions)} confirmed)"
    )
    print(
        f"  ratio confirmation / examination: renders {n_conf / max(n_exam, 1):.3f}, seconds "
        f"{t_conf / max(t_exam, 1e-9):.3f}"
    )
    for r in regions:
        print(f"    {r.text()}: " + (r.evidence.sentence("renders") if r.evidence else ""))


if __name__ == "__main__":
    main()
