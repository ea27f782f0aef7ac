"""One exception family for everything weakspot raises on purpose.

A message names the key, file or shape that is wrong and what would be right.
"""


class WeakspotError(Exception):
    """Base class of every error weakspot raises on purpose."""


class ConfigError(WeakspotError, ValueError):
    """params.yaml (or a keyword argument) is malformed, unknown or out of range."""


class DataError(WeakspotError, ValueError):
    """A data file is missing, unreadable, or its contents are not what was asked for."""


class ModelError(WeakspotError, ValueError):
    """A model under audit cannot be loaded or answers with the wrong shape, NaNs, or non-probabilities."""


class RenderError(WeakspotError, RuntimeError):
    """The renderer (Blender) failed or is not available."""
