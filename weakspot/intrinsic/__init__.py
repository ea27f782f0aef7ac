"""Intrinsic robustness (seeds/002, Yu et al., "Interpreting and Evaluating Neural Network Robustness", IJCAI 2019):
the robustness score psi (the inverse of the mean largest KL divergence in an eps-ball, on scale-invariant normalised
logits), decision surfaces, reference attacks (FGSM, PGD-30, CW-30, AutoAttack through IBM ART) and the defended
models the paper compares (adversarial training, min-max training, gradient regularisation, defensive distillation).

Importing this package registers the method (and loads its params model only).
"""

from weakspot.intrinsic.config import IntrinsicParams
from weakspot.methods import Method, StageSpec, register_method

METHOD = register_method(
    Method(
        "intrinsic",
        "Intrinsic robustness",
        "seeds/002 (Yu et al., IJCAI 2019)",
        params=IntrinsicParams,
        run="weakspot.intrinsic.run:run",
        report="weakspot.intrinsic.report:report",
        figures="weakspot.intrinsic.figures:figures",
        modalities=("image",),
        needs_train=True,
        white_box=True,
        finds="attack",
        stage=StageSpec(
            order=30,
            target_keys=("train",),
            headline=(
                "eps",
                "n_inputs",
                "none.clean_acc",
                "minmax.psi",
                "minmax.clean_acc",
                "claims.psi_orders_as_cw30",
                "claims.reparam_invariant",
            ),
        ),
    )
)
