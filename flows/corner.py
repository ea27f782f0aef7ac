"""Stage ``corner-<target>``: corner cases (seeds/003): realistic generated inputs on the target's decision boundary,
found by a search in an autoencoder's latent space through the target's gradients (white box, images).

The generator is trained once per training data set (a cached task keyed on the images, not the target) and shared
by every target on those data. Writes ``metrics/corner/<t>.json``, the report section under ``plots/corner/<t>/``
and ``findings/<t>/corner.parquet``.
"""

from __future__ import annotations

import flows  # noqa: F401
from prefect import flow

from tasks import paths
from tasks.common import lineage, run_main, source_digest, stage_params, target_params, \
    write_stage_result
from tasks.corner import generator_for


@flow(name="corner")
def corner_flow(target: str) -> dict:
    from pathlib import Path

    import numpy as np

    from tasks.data import read_prepared
    from tasks.target import load_target_model
    from weakspot.corner.experiment import GENERATOR_KEYS, run_corner
    from weakspot.corner.autoencoder import Generator
    from weakspot.device import resolve_device
    from weakspot.progress import printer

    top, t = target_params(target)
    _, p = stage_params("corner")
    import hashlib

    train_file = paths.prepared(target) / "train.parquet"
    gp = {k: v for k, v in p.model_dump(mode="json").items() if k in GENERATOR_KEYS}
    train = read_prepared(target, "train")
    X = np.ascontiguousarray(train.X, np.float32)
    # keyed on the pixels, not the file: the Parquet file also carries the target's own provenance metadata
    pixels = hashlib.sha256(str(X.shape).encode() + X.tobytes()).hexdigest()
    gen = generator_for(target, gp, pixels,
                        source_digest("weakspot.corner.autoencoder", "weakspot.corner.experiment",
                                      "weakspot.corner.config"), top["device"])
    dev = resolve_device(top["device"])
    g = Generator.from_bytes(Path(gen["blob"]).read_bytes(), device=dev)
    clf, spec = load_target_model(target, top["device"])
    classes = [str(c) for c in spec["classes"]]
    result, found = run_corner(clf, X, train.y, classes, p, device=dev, generator=g,
                               progress=printer(f"corner-{target}"))
    result.title = f"{result.title} ({target})"
    lin = lineage("corner", top, p, [paths.prepared(target), paths.model_dir(target)])
    lin["generator"] = {"blob": Path(gen["blob"]).name, "trained_on": str(train_file),
                        "training_seconds": round(gen["seconds"], 2)}
    write_stage_result("corner", result, lin, target=target, findings=found)
    m = result.metrics
    print(f"corner-{target}: median logit margin {m['margin_before']:.3g} -> {m['margin_after']:.3g}, realistic "
          f"yield {m['realistic_yield']:.1%} -> {paths.findings(target, 'corner')}")
    return m


if __name__ == "__main__":
    run_main(corner_flow, "corner", per_target=True)
