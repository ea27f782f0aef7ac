"""Prefect tasks: thin wrappers of weakspot library calls that read and write artifacts."""

from tasks._env import configure

configure()
