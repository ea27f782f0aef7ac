"""Weak segments: readable regions of the labelled evaluation rows where the model fails more often, each confirmed
on a held-out half against the rest of it (the error-tree idea of Deepchecks' weak segments and Microsoft's Error
Analysis, with the confirmation step they leave out).

Caveats first: the search and the confirmation split the target's evaluation rows (``test``) in two halves, so a
segment is judged on rows its tree never saw; the segments are as good as the features they are written in (a
tabular target's columns; an image target's simple image properties: brightness, RMS contrast and, in colour, each
channel's share), with the true class a candidate of its own. The entry point is :func:`weakspot.segments.run.run` (a
:class:`~weakspot.segments.run.SegmentsResult`); :func:`weakspot.segments.report.report` and
:func:`weakspot.segments.figures.figures` turn it into the report section. Importing this package registers the method
(and loads its params model only).
"""

from weakspot.methods import Method, StageSpec, register_method
from weakspot.segments.config import SegmentsParams

METHOD = register_method(
    Method(
        "segments",
        "Weak segments",
        "an error tree on held-out rows (as Deepchecks' weak segments, Microsoft's Error "
        "Analysis), confirmed against the rest of the held-out rows",
        params=SegmentsParams,
        run="weakspot.segments.run:run",
        report="weakspot.segments.report:report",
        figures="weakspot.segments.figures:figures",
        modalities=("tabular", "image"),
        stage=StageSpec(order=5),
    )
)
