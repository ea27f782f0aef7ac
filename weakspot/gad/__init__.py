"""Generalized Adversarial Distance (seeds/001, Bennette et al.): black-box search for high-confidence errors.

Caveats first: GAD audits a model it is given (:func:`weakspot.gad.run.run`: a target's trained classifier, used
only through ``predict_proba``, and its splits); it trains no model of its own but the pseudo-model of Algorithm 1.
The paper's SVM is the built-in scikit-learn architecture ``svm_grid`` (:data:`weakspot.models.SKLEARN_ARCHS`), its
biased splits :data:`weakspot.data.BIAS_PRESETS`. The baselines are re-implementations (:mod:`weakspot.gad.search`);
the attack's step size and cap are ours (the paper gives none); half the extraction design is jittered evaluation
rows (ours, :mod:`weakspot.gad.extract`). The protocol is repeated over split seeds (:mod:`weakspot.gad.seeds`), and
GAD's SDR is withheld where the pseudo-model fails the R^2 gate (``gad.min_pseudo_r2``).

Importing this package registers the method (and loads its params model only).
"""

from weakspot.gad.config import GadParams
from weakspot.methods import Method, StageSpec, register_method

METHOD = register_method(
    Method(
        "gad",
        "Generalized Adversarial Distance",
        "seeds/001 (Bennette et al.)",
        params=GadParams,
        run="weakspot.gad.run:run",
        report="weakspot.gad.report:report",
        figures="weakspot.gad.figures:figures",
        modalities=("tabular",),
        stage=StageSpec(
            order=10,
            outputs=("to_label.parquet", "to_label.csv"),
            plots=(("sdr_curve", "query", ("params:searches",)),),
            headline=(
                "*.sdr.gad",
                "*.sdr.random",
                "*.sdr.low_confidence",
                "*.errors.gad",
                "*.errors.random",
                "*.budget",
                "*.gad_reliable",
                "*.pseudo_r2",
                "*.gad_error_auc",
                "*.confidence_error_auc",
                "*.test_accuracy",
                "!*.per_seed.*",
            ),
        ),
    )
)
