"""Prefect flows, one per DVC stage (``python -m flows.<stage>``), plus the nightly audit flow."""

from tasks._env import configure

configure()
