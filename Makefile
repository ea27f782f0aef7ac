# The README's two commands. Both create .venv when missing and install what they need first.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.weakspot-installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: audit test check bench clean-artifacts

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing weakspot and its dependencies into $(VENV) (first time: a few minutes)..."
	@$(PY) -m pip install -q --no-compile -e ".[test]" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
	@touch $@

audit: $(STAMP)
	$(VENV)/bin/weakspot audit

test: $(STAMP)
	$(PY) tests/run.py

check: $(STAMP)
	$(VENV)/bin/weakspot check

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b; done

clean-artifacts:
	rm -rf data/targets data/render findings metrics plots reports .prefect
