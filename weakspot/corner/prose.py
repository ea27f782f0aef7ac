"""The corner-case section's words: its headline, summary paragraphs and captions, every number formatted from the
metrics (:func:`weakspot.corner.report.metrics_of`) or the params, never typed.

Caveats first: "realistic" is said of the corner cases only when the generator's gate holds (measured on held-out
images, :func:`weakspot.corner.controls.generator_gate`); when it fails, or was not measured, the headline says
"blurred, not realistic" (or "realism not measured") before anything else. The KDE of the generator's codes is
called "the generator's latent density", not realism: the independent judge is what the prose reports as realism.
``tests/corner/test_prose.py`` checks that every number in the headline and summary is one of the metrics' or the
params' values as formatted.
"""

from __future__ import annotations

from typing import Any, Dict, List

from weakspot.corner.claims import pct_ci, set_text
from weakspot.corner.config import PAPER_SETTINGS, CornerParams
from weakspot.fmt import fmt


def pairs_text(m: Dict[str, Any]) -> str:
    """``"3/9 (50), 2/8 (28)"``: the top class pairs with their counts, or "none"."""
    return ", ".join(f"{a}/{b} ({c})" for a, b, c in m["top_class_pairs"]) or "none"


def gate_text(g: Dict[str, Any]) -> str:
    """The gate's numbers in words."""
    ref = (
        f"; the reference classifier {g['reference_on_reconstructions']:.0%} against {g['reference_on_images']:.0%}"
        if "reference_on_images" in g
        else ""
    )
    return (
        f"the model recognises {g['model_on_reconstructions']:.0%} of the generator's reconstructions of "
        f"{g['n']} held-out images against {g['model_on_images']:.0%} of the images (ratio {g['ratio']:.2f}, gate "
        f"{g['gate']:.2f}){ref}"
    )


def depth_text(params: CornerParams) -> str:
    """The depth that ran, in words: what it runs and what the other depth adds (or added)."""
    own = "the generator, the search, realism and the judge's controls"
    comparisons = "the FGSM comparison (Sec. 4.5) and the search rerun at the paper's step (Sec. 4.3)"
    if params.comparisons:
        return f"study — {own}, and the paper's comparisons: {comparisons}"
    return f"audit — {own}; `corner.depth: study` adds {comparisons}"


def headline_of(m: Dict[str, Any], params: CornerParams) -> List[str]:
    """The report's one-paragraph headline for this target: the realism verdict first."""
    g, j, y = m.get("gate"), m.get("judge"), m.get("yield_vs_random")
    if g is None:
        first, what = "Corner cases (realism not measured: no held-out images): ", "generated inputs"
    elif not g["holds"]:
        first, what = f"Corner cases are blurred, not realistic ({gate_text(g)}): ", "blurred generated inputs"
    else:
        first, what = "Corner cases: ", "realistic inputs"
    judged = (
        f"; the independent judge passes {set_text(j['corner'])} of them, {set_text(j['random'])} of random "
        f"codes; judged boundary inputs per try: search {y['search_share']:.1%}, random codes "
        f"{y['random_share']:.1%}"
        if j is not None and y is not None
        else ""
    )
    return [
        first + f"{m['realistic_yield']:.1%} of {m['n_seeds']} latent seeds became {what} on the decision boundary "
        f"(median logit margin {fmt(m['margin_before'])} -> {fmt(m['margin_after'])} in {params.steps} Adam steps)"
        f"{judged}; top pairs: {pairs_text(m)}"
        + (f"; FGSM images are noisier (TV {m['tv_fgsm']:.3f} vs {m['tv_corner']:.3f})." if "tv_fgsm" in m else ".")
    ]


def method_paragraph(m: Dict[str, Any], params: CornerParams, use_disc: bool) -> str:
    """What the method does, as it ran."""
    disc_txt = (
        f" and a discriminator (training accuracy {fmt(m.get('disc_accuracy'))}; Sec. 3's loss alpha * "
        f"margin - D with alpha = {params.disc_alpha})"
        if use_disc
        else " and no discriminator (as in the paper's 2-D MNIST setup, Sec. 4.1)"
    )
    lr0, steps0 = PAPER_SETTINGS["lr"][0], PAPER_SETTINGS["steps"][0]
    return (
        "Corner cases (Platon, Avrin & Chan-Hon-Tong, seeds/003) are whole generated inputs, not perturbations "
        "of real ones, meant to look like the data yet sit on the classifier's decision boundary. A convolutional "
        "autoencoder (Sec. 4.2) learns the training images without labels; its decoder G maps a "
        f"{m['latent_dim']}-D code to an image. Random seeds drawn from the training codes' distribution are "
        f"optimised with Adam ({params.steps} steps, lr {params.lr}"
        f"{', annealed to 0 on a cosine' if params.lr_schedule == 'cosine' else ''}; the paper: {steps0} steps, "
        f"lr {lr0}) to minimise the logit margin between the two most likely classes of G(s), the classifier's "
        "gradients flowing through the decoder (white box), with a hinge keeping the seeds inside the latent "
        f"density (weight {params.realism_weight}; ours, not in the paper's loss){disc_txt}. "
        f"Depth: {depth_text(params)}."
    )


def search_paragraph(m: Dict[str, Any], params: CornerParams, use_disc: bool) -> str:
    """What the search did."""
    return (
        f"Over {m['n_seeds']} seeds the median logit margin went from {fmt(m['margin_before'])} to "
        f"{fmt(m['margin_after'])} in {params.steps} Adam steps (x{fmt(m['margin_reduction'])}). "
        f"{m['near_boundary_share']:.0%} of the optimised seeds ended with their top two probabilities within "
        f"{params.boundary_margin} (before: {m['near_boundary_share_before']:.0%}); {m['realistic_share']:.0%} "
        "stayed inside the generator's latent density (a Gaussian KDE of the training codes at or above the "
        f"{params.realism_quantile:.0%} quantile of the codes' own{', and D(G(s)) > 0' if use_disc else ''}; "
        f"before the search: {m['realistic_share_before']:.0%}, since the seeds are drawn from that density). "
        f"Both: {m['realistic_yield']:.1%} ({m['n_corner_cases']} corner cases). Most confused class pairs: "
        f"{pairs_text(m)}. The seeds moved {fmt(m['seed_move_median'])} standardised latent units (median; the "
        "paper, Sec. 4.4, notes that its seeds moved only marginally)."
    )


def judge_paragraph(m: Dict[str, Any], params: CornerParams) -> str:
    """Realism by the independent judge, against random codes, the seeds and real images; the yield; the gate."""
    j, y, g = m.get("judge"), m.get("yield_vs_random"), m.get("gate")
    if j is None or y is None or g is None:
        return (
            "Realism is not judged independently on this target: it has fewer than ten held-out images to "
            "calibrate the judge and measure the generator's gate on, so nothing here is called realistic."
        )
    lo, hi = y["lift_interval"]
    return (
        "Realism judged independently of the generator and the audited model: a reference classifier trained "
        f"here on {j['reference_train']} real training images ({j['reference_epochs']} epochs; "
        f"{j['reference_accuracy']:.0%} accurate on the real held-out control half) must put the image's two "
        "classes on top, its nearest real training image must be no farther (RMS "
        f"{fmt(j['near_threshold'])}) than for {j['near_quantile']:.0%} of {j['n_calibration']} real held-out "
        f"images, and it must be as sharp (total variation at least {fmt(j['sharp_threshold'])}) as that share of "
        f"them. The judge passes "
        + (f"corner cases {set_text(j['corner'])}" if j["corner"]["n"] else "no corner case (there is none to judge)")
        + ", the seeds before the search "
        f"{set_text(j['seeds'])}, random codes decoded by the same generator {set_text(j['random'])}, and real "
        f"held-out images {set_text(j['real'])} (those pass near and sharp {j['real']['near']} and "
        f"{j['real']['sharp']} times of {j['real']['n']}; a confident real image's runner-up need not agree, so "
        "they are the control for nearness and sharpness). Judged boundary inputs per try (within "
        f"{params.boundary_margin} of the boundary and passed): the search "
        f"{pct_ci(y['search_share'], y['search_interval'], y['search'], y['n_seeds'])}, random codes "
        f"{pct_ci(y['random_share'], y['random_interval'], y['random'], y['n_random'])}, "
        + (
            f"lift {fmt(y['lift'])} (95% {fmt(lo)}-{fmt(hi)})"
            if lo is not None
            else "no lift (neither found any)"
            if not y["search"] and not y["random"]
            else f"lift {fmt(y['lift'])}"
        )
        + f". The generator's gate: {gate_text(g)}; "
        + (
            "it holds."
            if g["holds"]
            else "it fails, so the corner cases are blurred, not realistic: inputs on "
            "which the model is undecided within the generator's blurred image space. A stronger generator (more "
            "epochs, a larger code: profiles/paper.yaml) is needed before they say anything about real inputs."
        )
    )


def noise_paragraph(m: Dict[str, Any], params: CornerParams) -> str:
    """Sec. 4.5: FGSM against one latent step."""
    return (
        f"Noise (Sec. 4.5): FGSM at eps = {params.fgsm_eps} on decoded seeds gives images with mean total "
        f"variation {m['tv_fgsm']:.3f} and distance to the data manifold (RMS of x - G(E(x)), through the same "
        f"autoencoder that decoded the seeds, so it favours its own decodings) {m['manifold_fgsm']:.3f}, against "
        f"{m['tv_corner']:.3f} and {m['manifold_corner']:.3f} for one latent step of the same length (decoded "
        f"seeds themselves: {m['tv_decoded']:.3f}, {m['manifold_decoded']:.3f}); FGSM changed the prediction of "
        f"{m['flip_rate_fgsm']:.0%} of the seeds, the latent step of {m['flip_rate_latent']:.0%}."
    )


def settings_paragraph(m: Dict[str, Any], params: CornerParams, differ: List[Dict[str, Any]]) -> str:
    """The settings that differ, and the margin's fall at the paper's step, rerun on the first seeds."""
    text = (
        "Settings that differ from the paper's: "
        + "; ".join(f"{r['setting']} {r['ran']} (paper: {r['paper']})" for r in differ)
        + "."
    )
    p = m.get("paper_lr")
    if p is None or (params.lr == p["lr"] and params.lr_schedule == "constant"):
        return text
    return text + (
        " Why the step differs: the paper does not say in which units of its latent space its lr is "
        f"taken; here the code is standardised (one unit = the training codes' spread). Rerun at lr "
        f"{p['lr']}, constant, on the first {p['n_seeds']} seeds, the median margin fell only "
        f"x{fmt(p['margin_reduction'])} ({fmt(p['margin_before'])} -> {fmt(p['margin_after'])}; "
        f"{p['near_boundary_share']:.0%} near the boundary), against x{fmt(m['margin_reduction'])} at this "
        "audit's step."
        + (
            " The annealed step lets a seed that reached the boundary settle on it instead of bouncing across it."
            if params.lr_schedule == "cosine"
            else ""
        )
    )


def summary_of(m: Dict[str, Any], params: CornerParams, use_disc: bool, differ: List[Dict[str, Any]]) -> List[str]:
    """The section's paragraphs: the method, the search, realism judged independently, noise, caveats, settings."""
    return [
        method_paragraph(m, params, use_disc),
        search_paragraph(m, params, use_disc),
        judge_paragraph(m, params),
        *([noise_paragraph(m, params)] if "tv_fgsm" in m else []),
        "Caveats: the generator's latent density"
        + (" and its discriminator are" if use_disc else " is")
        + " the generator's own view of the data; the judge above is a second classifier and pixel statistics, "
        "not a person. Corner cases carry no true label, so they show where the model is undecided on generated "
        "inputs, not errors.",
        settings_paragraph(m, params, differ),
    ]
