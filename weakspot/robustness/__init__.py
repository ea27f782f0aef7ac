"""The robustness curve: a white-box image model's accuracy under PGD (and AutoAttack where enabled) over a grid of
perturbation budgets eps, on held-out test inputs, each point with its 95% interval (the "security curve" ART users
ask for, Carlini et al.'s recommendation to report accuracy against eps rather than at one eps).

Importing this package registers the method (and loads its params model only).
"""

from weakspot.methods import Method, StageSpec, register_method
from weakspot.robustness.config import RobustnessParams

METHOD = register_method(
    Method(
        "robustness",
        "Robustness curve: accuracy under attack over the perturbation budget",
        "ours (Madry et al. 2018's PGD; Croce and Hein 2020's AutoAttack through IBM ART)",
        params=RobustnessParams,
        run="weakspot.robustness.run:run",
        report="weakspot.robustness.report:report",
        figures="weakspot.robustness.figures:figures",
        modalities=("image",),
        white_box=True,
        finds="attack",
        stage=StageSpec(order=25, plots=(("curve", "eps", ("clean", "pgd")),)),
    )
)
