"""The examiner's figures on a target: the ones the report's items name, one panel per examiner where it says so."""

from weakspot.examine.figures import figures


def test_the_figures_the_report_names(world, examined):
    from matplotlib.figure import Figure

    res, out, _ = examined
    params = world[4]
    figs = figures(res, params)
    assert set(figs) == {"regions", "curves", "curves_renders", "per_class", "tsne", "worst"}
    assert len(figs["regions"].axes[0].get_yticklabels()) == len([r for r in res.regions if r.evidence])
    assert all(isinstance(f, Figure) for f in figs.values())
    named = {item["figure"] for item in out.section.items if "figure" in item}
    assert named == set(figs)
    assert len(figs["per_class"].axes) == len(params.examiners)  # one panel per examiner
    assert len(figs["worst"].axes) == len(params.examiners) * params.n_worst
    assert len(figs["tsne"].axes) == len([e for e in params.examiners if e != "random"])
    curves = figs["curves"].axes[0]
    assert [line.get_label() for line in curves.get_lines()][:3] == list(params.examiners)
