"""HDA's entry point on an image target: the whole protocol (RQ1-RQ4) and the repaired model of RQ4."""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from weakspot.data.dataset import image_range
from weakspot.device import resolve_device
from weakspot.errors import DataError
from weakspot.hda.config import HdaParams, radius_of
from weakspot.hda.experiment import run_hda
from weakspot.hda.generate import LogProbs, classifier_proba, module_proba
from weakspot.methods import AuditTarget, MethodReport


def run(target: AuditTarget, params: HdaParams, runtime: Any) -> MethodReport:
    import torch

    p = params
    dev = resolve_device(runtime.device)
    arrays = {}
    for name, s in (("test", target.test), ("val", target.val), ("train", target.train)):
        X = np.asarray(s.X, np.float32)
        if not np.isfinite(X).all():
            raise DataError(f"{target.name}: the {name} inputs hold NaN or infinite values")
        arrays[name] = (X, np.asarray(s.y, np.int64))
    X_tr, y_tr = arrays["train"]
    clip = image_range(X_tr)
    radius = radius_of(p, X_tr.shape[1] if X_tr.ndim == 4 else 1, clip)
    clf = target.model
    module = getattr(clf, "module", None)
    if module is not None and getattr(clf, "outputs", "logits") != "logits":  # probabilities: log p are its logits
        module = torch.nn.Sequential(module, LogProbs())
    if module is not None:
        module = module.to(dev).eval()
    proba_fn = module_proba(module) if module is not None else classifier_proba(clf, dev)
    adv, adv_label, adv_info = None, "", {}
    if module is not None and p.adversarial_model and getattr(clf, "module", None) is not None:
        from weakspot.adversarial.defended import defended_models

        mods, info, eps = defended_models(target, ["minmax"], runtime.section("intrinsic"), runtime)
        adv, adv_info = mods["minmax"], info["minmax"]
        adv_label = f"the intrinsic stage's min-max model ({adv_info['label']}, eps {eps:.4g})"
    X_cand = np.concatenate([arrays["test"][0], arrays["val"][0]])
    y_cand = np.concatenate([arrays["test"][1], arrays["val"][1]])
    section, found, repaired = run_hda(
        module, proba_fn, X_tr, y_tr, X_cand, y_cand, *arrays["val"], *arrays["test"],
        [str(c) for c in target.classes], p, radius=radius, clip=clip, adv_module=adv, adv_label=adv_label,
        device=dev, progress=runtime.progress,
        cand_names=[f"test input {i}" for i in range(len(arrays["test"][0]))]
        + [f"validation input {i}" for i in range(len(arrays["val"][0]))])
    section.title = f"{section.title} ({target.name})"
    lineage = {"adversarial_model": adv_info} if adv_info else {}
    if repaired is None:
        out = {"state_dict": None, "spec": {"repaired_by": None, "why": "fine-tuning needs a torch model that answers "
                                            "logits (white-box), or hda.finetune is disabled"}}
    else:
        buf = io.BytesIO()
        torch.save(repaired["state_dict"], buf)
        lineage["seconds"] = repaired.pop("seconds", {})
        out = {"state_dict": buf.getvalue(),
               "spec": {"repaired_by": "hda: adversarial fine-tuning on HDA's test cases (seeds/004 RQ4)",
                        "before": repaired["before"], "after": repaired["after"], "settings": repaired["settings"]}}
    return MethodReport(section=section, findings=found, repaired=out, lineage=lineage)
