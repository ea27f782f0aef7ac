"""weakspot: audit a trained classifier for its weak spots, nightly and reproducibly.

The library is pure: it imports neither Prefect nor DVC and knows no file layout.
"""

__version__ = "0.1.0"

from weakspot.errors import (  # noqa: F401
    ConfigError,
    DataError,
    ModelError,
    WeakspotError,
)
