"""What more than one method uses to attack and harden a model: defended copies of a model (adversarial training,
min-max training, gradient regularisation, distillation), trained once per target and shared between the methods
that measure them (intrinsic robustness, seeds/002; HDA's RQ3, seeds/004)."""
