"""The ``segments`` section of params.yaml: the error tree that proposes weak segments and their confirmation.

Caveats first: every default is ours (no paper specifies this method): a tree of depth 3 keeps each segment to at
most three conditions a person reads at a glance; a segment needs ``min_rows`` rows (or ``min_fraction`` of the
search half, whichever is larger) so that its failure rate means something. An unknown key is an error.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SegmentsParams(BaseModel):
    """params.yaml ``segments`` section."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    seed: int = 0  # the halves are drawn from it
    max_depth: int = Field(3, ge=1, le=6)  # conditions per segment, at most
    min_rows: int = Field(10, ge=2)  # rows of the search half a segment needs, at least
    min_fraction: float = Field(0.02, gt=0, lt=0.5)  # ... or this share of the search half, if larger
    confirm_fraction: float = Field(0.5, gt=0.1, lt=0.9)  # the evaluation rows kept back for the confirmation
    max_segments: int = Field(8, ge=1, le=64)  # candidates confirmed and reported, at most
