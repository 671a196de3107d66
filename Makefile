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

.PHONY: setup browser demo test unit lint bench synth clean

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
