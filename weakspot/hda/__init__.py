"""Hierarchical distribution-aware testing (seeds/004, Huang et al., "Hierarchical Distribution-Aware Testing of Deep
Learning"): a VAE + adaptive KDE global distribution, test seeds where the data are dense and the model fragile
(gradient or output-separation indicators, checked against Webb et al.'s statistical local robustness), a black-box
two-step genetic algorithm for natural adversarial examples (prediction loss, then loss plus a perceptual term), the
baselines behind the same protocol (PGD, neuron-coverage fuzzing, FODA), and adversarial fine-tuning that gives a
repaired model.

Caveats first: ``hda.depth`` is ``audit`` by default (the weak spots and their evidence: the density, the indicator,
the seeds and HDA's GA around the selected and random seeds); ``study`` adds the paper's comparisons, baselines and
the repaired model. Black-box at its core (the GA reads probabilities only); its gradient indicator, the PGD and
coverage baselines and the fine-tuning run where the model is a torch module. Its adversarially trained model (RQ3) is the
intrinsic method's min-max model, with the ``intrinsic`` section's settings (trained in HDA's own stage: a
cached call never crosses stages, tasks/identity.py). Importing this
package registers the method (and loads its params model only).
"""

from weakspot.hda.config import HdaParams
from weakspot.methods import Method, StageSpec, register_method

METHOD = register_method(
    Method(
        "hda",
        "Hierarchical distribution-aware testing",
        "seeds/004 (Huang et al.)",
        params=HdaParams,
        run="weakspot.hda.run:run",
        report="weakspot.hda.report:report",
        figures="weakspot.hda.figures:figures",
        modalities=("image",),
        needs_train=True,
        reads=("intrinsic",),
        finds="attack",
        stage=StageSpec(
            order=45,
            target_keys=("train",),
            repairs=True,
            headline=(
                "hda.ssim",
                "hda.valid_ae_share",
                "coverage.ae_prop",
                "ooda.ae_prop",
                "finetune.hda.pgd_robustness",
                "finetune.none.pgd_robustness",
                "n_seeds",
            ),
        ),
    )
)
