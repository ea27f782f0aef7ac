"""Corner cases (seeds/003, Platon, Avrin & Chan-Hon-Tong, ECAI 2020): generated inputs on the decision boundary.

Caveats first: white box only (a :class:`weakspot.models.TorchClassifier` on images ``(n, C, H, W)`` in [0, 1],
C = 1 or 3). The entry point is :func:`weakspot.corner.run.run` (a :class:`~weakspot.corner.run.CornerResult`), which
:func:`weakspot.corner.report.report` and :func:`weakspot.corner.figures.figures` turn into the report section; the
parts are :func:`weakspot.corner.generator.train_generator` (:func:`weakspot.corner.autoencoder.train_autoencoder`
on the params), :func:`weakspot.corner.realism.latent_density`, :func:`weakspot.corner.search.search_corner_cases`
and :func:`weakspot.corner.search.fgsm_vs_latent`. Importing this package registers the method (and loads its params
model only).
"""

from weakspot.corner.config import CornerParams
from weakspot.methods import Method, StageSpec, register_method

METHOD = register_method(
    Method(
        "corner",
        "Corner cases",
        "seeds/003 (Platon, Avrin & Chan-Hon-Tong, ECAI 2020)",
        params=CornerParams,
        run="weakspot.corner.run:run",
        report="weakspot.corner.report:report",
        figures="weakspot.corner.figures:figures",
        modalities=("image",),
        needs_train=True,
        white_box=True,
        stage=StageSpec(
            order=40,
            headline=(
                "gate.holds",
                "judge.corner.share",
                "judge.random.share",
                "yield_vs_random.lift",
                "top_class_pairs",
            ),
        ),
    )
)
