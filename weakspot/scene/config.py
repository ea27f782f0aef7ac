"""The ``scene`` section of params.yaml: object classes, instance split, views per instance, renderer settings, bounds.

Caveats first: an unknown key is an error (``extra="forbid"``); ``bounds`` only *overrides* factors of
:data:`~weakspot.scene.space.DEFAULT_BOUNDS` (Table 1 mapped to Blender units), and the Cycles device comes from the
top-level ``device`` setting, not from this section.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Sec. 4.1 and Table 1.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from weakspot.scene.objects import CLASSES, OBJECTS
from weakspot.scene.space import SceneSpace


class SceneParams(BaseModel):
    """Params of the scene: which objects, how many views, how to render, and factor-bound overrides.

    Example
    -------
    >>> p = SceneParams(resolution=32, bounds={"view_elevation": (-30.0, 30.0)})
    >>> p.space().bounds["view_elevation"]
    (-30.0, 30.0)
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # paper Sec. 4: ShapeNet classes; ours are procedural stand-ins, keeping the hard round ones (bowl, barrel, Fig. 2)
    classes: List[str] = Field(
        default_factory=lambda: list(CLASSES),
        min_length=2,
        description="object classes; the label is the position in this list",
    )
    train_instances: int = Field(8, ge=1, le=10_000, description="training instances per class")
    val_instances: int = Field(4, ge=1, le=10_000, description="validation instances per class (examined ones)")
    views_per_instance: int = Field(
        10, ge=1, le=10_000, description="m, random views per instance (paper Sec. 4.1: 10)"
    )
    resolution: int = Field(32, ge=16, le=1024, description="image side in pixels (paper: not stated)")
    samples: int = Field(8, ge=1, le=4096, description="Cycles samples per pixel")
    workers: int = Field(2, ge=0, le=256, description="Blender worker processes (0 = in-process)")
    seed: int = Field(0, ge=0, description="instance split, factor draws and Cycles' sampling seed")
    bounds: Dict[str, Tuple[float, float]] = Field(
        default_factory=dict,
        description="overrides of the factor bounds (Blender units), e.g. view_elevation: [-30, 30]",
    )

    @field_validator("classes")
    @classmethod
    def _known_classes(cls, v: List[str]) -> List[str]:
        unknown = [c for c in v if c not in OBJECTS]
        if unknown:
            raise ValueError(f"unknown classes {unknown}; valid classes: {', '.join(OBJECTS)}")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate class names in {v}")
        return v

    @field_validator("bounds")
    @classmethod
    def _valid_bounds(cls, v: Dict[str, Tuple[float, float]]) -> Dict[str, Tuple[float, float]]:
        SceneSpace(v)  # raises ConfigError (a ValueError) naming the factor and what is allowed
        return v

    def space(self) -> SceneSpace:
        """The :class:`SceneSpace` with this section's bound overrides."""
        return SceneSpace(self.bounds)
