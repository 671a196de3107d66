# Every target sets itself up: on a fresh machine `make demo` or `make test` is all it takes.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NPM_STAMP := node_modules/.installed
# Node.js 22 from package.json (the npm package `node`), first on the PATH: jsii (under aws-cdk-lib) and the CDK
# CLI run on it, whatever Node.js the machine has (jsii refuses Node 20 as past its end of life, loudly).
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
export PYTHONDONTWRITEBYTECODE := 1
# pytest workers: the machines have 2 cores.
TEST_WORKERS ?= 2

.PHONY: setup browser demo test test-fast unit lint bench synth clean plan-identity

setup: $(STAMP) $(NPM_STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Headless Chromium for the test that opens demo-report.html (tests/integration/test_demo_report_browser.py):
# Debian's package, installed when missing (CI runs as root on a fresh Debian machine).
browser:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

demo: setup
	$(PY) -m sim.demo

test: setup browser lint
	$(PY) -m pytest -n $(TEST_WORKERS) -q

unit: setup
	$(PY) -m pytest -q tests/unit

# The pure core's unit tests only: no moto, sim/, local server or subprocess (marker `adapter`) and no hypothesis
# property test (marker `fuzz`, set by tests/conftest.py); `make test` still runs them all. Wall time on this
# 2-core machine, shared with a CI run (1242 tests): 42-49 s with 2 workers, 41 s with TEST_WORKERS=1.
# The other unit suites, 2 workers: `-m adapter` (134 tests) 75 s, `-m fuzz` (10 hypothesis tests) 60 s.
test-fast: setup
	$(PY) -m pytest -n $(TEST_WORKERS) -q tests/unit -m "not adapter and not fuzz"

# Are the core's plans those recorded on the base commit of issue #29's refactor? The 400 random cases, then every
# plan call of tests/unit and tests/integration (scripts/plan_identity.py; docs/status.md, "Plan identity").
plan-identity: setup
	$(PY) scripts/plan_identity.py -n $(TEST_WORKERS)

# lint-imports reads the package from source: the layer's folder and the repo root (for sim/) on the path.
lint: setup
	$(PY) -m ruff check .
	PYTHONPATH=.:layers/nodescale/python $(VENV)/bin/lint-imports

bench: setup
	$(PY) -m bench

synth: setup
	npx cdk synth -c clusterName=demo-cluster

clean:
	rm -rf $(VENV) node_modules cdk.out build .pytest_cache .ruff_cache
