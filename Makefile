# The README's two commands. Both create .venv when missing and install what they need first.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.weakspot-installed
COMPILED := $(VENV)/.weakspot-compiled
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: audit test check bench clean-artifacts lock

LOCK := requirements.lock
QUIET_PIP := { grep -v "is ignored: it is neither a file nor a directory" || true; }

# Every dependency at the exact version and hash of requirements.lock (the versions CI tested), then weakspot itself
# without resolving anything. `make lock` refreshes the lock on purpose, from pyproject.toml's ranges.
$(STAMP): pyproject.toml $(LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing weakspot and its dependencies into $(VENV) from $(LOCK) (first time: a few minutes)..."
	@# pip 23 (Python 3.11's own) refuses a hash-checked requirement with extras (sqlalchemy[asyncio]); 26.3 takes it
	@$(PY) -m pip install -q pip==26.3 2>&1 | $(QUIET_PIP)
	@$(PY) -m pip install -q --no-compile --require-hashes -r $(LOCK) 2>&1 | $(QUIET_PIP)
	@# (setuptools' notes on editable installs, printed by the build backend even with -q, silenced)
	@PYTHONWARNINGS=ignore $(PY) -m pip install -q --no-compile --no-deps -e . 2>&1 | $(QUIET_PIP)
	@touch $@

# Every installed module compiled once, on every core (about 30 s here; a stamp of its own, so a .venv installed
# before this step gets it too). Python reads a .pyc where one is even when PYTHONDONTWRITEBYTECODE stops it writing
# one (as on this machine): without them every stage, worker, server and DVC command compiled pandas, scikit-learn,
# torch and DVC from source again, seconds of CPU each. compile_dir's verdict is not checked: a file that does not
# compile on this Python (torch ships one in Python 3.12's syntax) only stays uncompiled. The packages' own test
# folders (tests/, test/: a fifth of the files, never imported at run time) are left out.
$(COMPILED): $(STAMP)
	@echo "compiling the installed modules once..."
	@$(PY) -c 'import compileall, os, re, sys, sysconfig; p = sysconfig.get_paths(); d = sorted({p["purelib"], p["platlib"]}); \
		gone = [x for x in d if not os.path.isdir(x)]; gone and sys.exit(f"no site-packages folder at {gone}"); \
		[compileall.compile_dir(x, quiet=2, workers=0, rx=re.compile(re.escape(x) + r"[/\\](?:.+[/\\])?tests?[/\\]")) for x in d]'
	@touch $@

lock:
	@test -x .venv-lock/bin/pip-compile || { $(PYTHON) -m venv .venv-lock && .venv-lock/bin/pip install -q pip-tools; }
	.venv-lock/bin/pip-compile --quiet --allow-unsafe --extra=test --generate-hashes --no-emit-find-links \
		--no-emit-index-url --output-file=$(LOCK) pyproject.toml

audit: $(COMPILED)
	$(VENV)/bin/weakspot audit

# pytest-xdist: the tests that share an audited repository or a trained model run on one worker each (--dist
# loadgroup; the groups and their order, longest work first, come from tests/conftest.py, kept by
# --no-loadscope-reorder); the stages the tests start are subprocesses, and tests wait (a cron minute, a lock, a
# kill), so 4 workers keep the 2 cores busier than 3 (docs/results/test-suite.md)
TEST_WORKERS ?= 4
test: $(COMPILED)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=30

check: $(COMPILED)
	$(VENV)/bin/weakspot check

bench: $(COMPILED)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b; done

clean-artifacts:
	rm -rf data/targets data/render findings metrics plots reports .prefect
