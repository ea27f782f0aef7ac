"""Stage ``hda-<target>``: hierarchical distribution-aware testing (seeds/004) of an image target: a VAE + adaptive
KDE global distribution, seeds where the data are dense and the model fragile, the two-step GA's natural AEs
against PGD, coverage-guided fuzzing and FODA, the adversarially trained model of the intrinsic stage (the same
cached task), and adversarial fine-tuning, whose HDA-tuned model is written as the repaired model.

Writes ``metrics/hda/<t>.json``, the report section under ``plots/hda/<t>/``, ``findings/<t>/hda.parquet`` and
``data/targets/<t>/repaired_hda/`` (``model.pt`` + ``model.json``: load it as the target's model is loaded, with
its accuracy and robustness before and after, and its lineage).
"""

from __future__ import annotations

import flows  # noqa: F401
from prefect import flow

from tasks import paths
from tasks.common import lineage, run_main, stage_params, target_params, write_stage_result


@flow(name="hda")
def hda_flow(target: str) -> dict:
    import io

    import numpy as np
    import torch

    from tasks.data import image_range, read_prepared
    from tasks.target import load_target_model
    from weakspot.device import resolve_device
    from weakspot.errors import DataError
    from weakspot.hda.config import radius_of
    from weakspot.hda.experiment import run_hda
    from weakspot.hda.generate import LogProbs, classifier_proba, module_proba
    from weakspot.io import write_bytes, write_json
    from weakspot.progress import printer
    from weakspot.targets import METHODS

    top, t = target_params(target)
    _, p0 = stage_params("hda")
    p = p0.for_target(target)
    dev = resolve_device(top["device"])
    clf, spec = load_target_model(target, top["device"])
    classes = [str(c) for c in spec["classes"]]
    te, va, tr = (read_prepared(target, s) for s in ("test", "val", "train"))
    arrays = {}
    for name, s in (("test", te), ("val", va), ("train", tr)):
        X = np.asarray(s.X, np.float32)
        if not np.isfinite(X).all():
            raise DataError(f"{paths.prepared(target)}: the {name} inputs hold NaN or infinite values")
        arrays[name] = (X, np.asarray(s.y, np.int64))
    X_tr, y_tr = arrays["train"]
    clip = image_range(X_tr)
    radius = radius_of(p, target, X_tr.shape[1] if X_tr.ndim == 4 else 1, clip)
    module = getattr(clf, "module", None)
    if module is not None and getattr(clf, "outputs", "logits") != "logits":  # probabilities: log p are its logits
        module = torch.nn.Sequential(module, LogProbs())
    if module is not None:
        module = module.to(dev).eval()
    proba_fn = module_proba(module) if module is not None else classifier_proba(clf, dev)
    adv, adv_label, adv_info = None, "", {}
    if module is not None and p.adversarial_model and METHODS.get("intrinsic").misfit(t) is None:
        from tasks.intrinsic import defended_modules

        mods, info, eps = defended_modules(target, ["minmax"], clf)
        adv, adv_info = mods["minmax"], info["minmax"]
        adv_label = f"the intrinsic stage's min-max model ({adv_info['label']}, eps {eps:.4g})"
    X_cand = np.concatenate([arrays["test"][0], arrays["val"][0]])
    y_cand = np.concatenate([arrays["test"][1], arrays["val"][1]])
    result, found, repaired = run_hda(module, proba_fn, X_tr, y_tr, X_cand, y_cand, *arrays["val"], *arrays["test"],
                                      classes, p, radius=radius, clip=clip, adv_module=adv, adv_label=adv_label,
                                      device=dev, progress=printer(f"hda-{target}"),
                                      cand_names=[f"test input {i}" for i in range(len(arrays["test"][0]))]
                                      + [f"validation input {i}" for i in range(len(arrays["val"][0]))])
    result.title = f"{result.title} ({target})"
    lin = lineage("hda", top, p, [paths.prepared(target), paths.model_dir(target)])
    if adv_info:
        lin["adversarial_model"] = adv_info
    out = paths.repaired(target, "hda")
    if repaired is not None:
        buf = io.BytesIO()
        torch.save(repaired["state_dict"], buf)
        write_bytes(out / "model.pt", buf.getvalue())
        lin["seconds"] = repaired.pop("seconds", {})
        base = {k: v for k, v in spec.items() if k != "lineage"}
        write_json(out / "model.json", {**base, "weights": str(out / "model.pt"),
                                        "repaired_by": "hda: adversarial fine-tuning on HDA's test cases (seeds/004 RQ4)",
                                        "before": repaired["before"], "after": repaired["after"],
                                        "settings": repaired["settings"], "lineage": lin})
    else:
        write_json(out / "model.json", {"repaired_by": None, "why": "fine-tuning needs a torch model that answers "
                                        "logits (white-box), or hda.finetune is disabled", "lineage": lin})
    write_stage_result("hda", result, lin, target=target, findings=found)
    m = result.metrics
    print(f"hda-{target}: AE proportion {m['hda']['ae_prop']:.0%} (HDA) at L-inf {radius:.4g}; repaired model -> "
          f"{out}")
    return m


if __name__ == "__main__":
    run_main(hda_flow, "hda", per_target=True)
