"""Hierarchical distribution-aware testing (seeds/004, Huang et al., "Hierarchical Distribution-Aware Testing of Deep
Learning"): a VAE + adaptive KDE global distribution, test seeds where the data are dense and the model fragile
(gradient or output-separation indicators, checked against Webb et al.'s statistical local robustness), a black-box
two-step genetic algorithm for natural adversarial examples (prediction loss, then loss plus a perceptual term), the
baselines behind the same protocol (PGD, neuron-coverage fuzzing, FODA), and adversarial fine-tuning that gives a
repaired model.
"""
