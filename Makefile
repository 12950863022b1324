# Two commands on a fresh Debian 12 machine: `make run` and `make test`.
# Each installs what it needs: Debian packages, the virtualenv, the cached
# Kubernetes build (~/.cache/kuberaven/k8s-v1.20.2, KUBERAVEN_K8S_CACHE to move it).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEBS_STAMP := $(VENV)/.debian-packages
PYTEST_ARGS ?=
# Test processes: most integration tests wait on servers (Octavia, leases, the control plane), so two
# processes, each with its own servers, halve the wall time even on 2 cores.
TEST_WORKERS ?= 2
# --require-all (tests/conftest.py): a test skipped for want of root or of a package `make deps` installs fails
# the run; a bare `pytest` skips it and names it in a summary at the end.

.PHONY: run test deps venv k8s lint unit integration bench clean

run: k8s
	$(BIN)/kuberaven run

test: k8s lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

deps: $(DEBS_STAMP)
$(DEBS_STAMP): scripts/install-debian-deps.sh
	KUBERAVEN_NEED_SOURCE=1 bash scripts/install-debian-deps.sh
	@mkdir -p $(VENV) && touch $@

venv: $(STAMP)
$(STAMP): pyproject.toml examples/simpleexampleservice/pyproject.toml $(DEBS_STAMP)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	# The example plugin (docs/provisioning.md), found through its entry point.
	$(BIN)/pip install -q --no-deps -e examples/simpleexampleservice
	touch $@

k8s: venv
	$(BIN)/kuberaven testenv build

lint: venv
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

integration: k8s
	$(BIN)/pytest tests/integration $(PYTEST_ARGS)

bench: k8s
	$(BIN)/python bench/watch_bench.py
	$(BIN)/python bench/inventory_bench.py
	$(BIN)/python bench/sync_bench.py
	$(BIN)/python bench/network_bench.py
	$(BIN)/python bench/run_bench.py
	$(BIN)/python bench/apply_bench.py
	$(BIN)/python bench/vif_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .kuberaven
