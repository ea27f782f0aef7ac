"""weakspot: audit a trained classifier for its weak spots, nightly and reproducibly.

The library is pure: it imports neither Prefect nor DVC and knows no file layout. From Python:
``weakspot.audit(model, X_test, y_test)`` (:mod:`weakspot.api`).
"""

__version__ = "0.1.0"

from weakspot.errors import (  # noqa: F401
    ConfigError,
    DataError,
    ModelError,
    WeakspotError,
)


def __getattr__(name):  # PEP 562: ``weakspot.audit`` imports the API on first use, so ``import weakspot`` stays light
    if name == "audit":
        import importlib

        return importlib.import_module("weakspot.api").audit
    raise AttributeError(f"module 'weakspot' has no attribute {name!r}")
