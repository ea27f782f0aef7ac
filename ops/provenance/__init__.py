"""Provenance: the chain of stages behind a number, and a past audit reproduced (see ops/__init__.py)."""
