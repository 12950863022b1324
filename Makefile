# Two commands on a fresh Debian 12 machine: `make run` and `make test`.
# Each installs what it needs: Debian packages, the virtualenv, the cached
# Kubernetes build (~/.cache/kuberaven/k8s-v1.20.2, KUBERAVEN_K8S_CACHE to move it).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEBS_STAMP := $(VENV)/.debian-packages
WEB_LIBS := src/kuberaven/web/libs
WEB_LIBS_STAMP := $(WEB_LIBS)/node_modules/.installed
PYTEST_ARGS ?=
# Test processes: most integration tests wait on servers (Octavia, leases, the control plane), so three
# processes, each with its own servers, share 2 cores well (docs/testing.md).
TEST_WORKERS ?= 3
# --require-all (tests/conftest.py): a test skipped for want of root or of a package `make deps` installs fails
# the run; a bare `pytest` skips it and names it in a summary at the end.

.PHONY: run test deps venv web-libs k8s guest lint unit integration bench clean

run: k8s web-libs
	$(BIN)/kuberaven run

test: k8s guest lint web-libs
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --require-all $(PYTEST_ARGS)

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

# The web UI's plots and network picture (uPlot, Cytoscape.js): the pinned versions of web/libs/package-lock.json,
# into its node_modules (not in git), served by the daemon at /libs/ (web/libs.py). The page works without them.
web-libs: $(WEB_LIBS_STAMP)
$(WEB_LIBS_STAMP): $(WEB_LIBS)/package.json $(WEB_LIBS)/package-lock.json $(DEBS_STAMP)
	cd $(WEB_LIBS) && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

k8s: venv
	$(BIN)/kuberaven testenv build

# The nested nodes' VM guest (testing/vm_image.py): Debian's kernel package (apt-get download) unpacked to vmlinux
# and a busybox initramfs, cached under ~/.cache/kuberaven/vm/ by the packages' versions; built once.
guest: venv
	$(BIN)/python -m kuberaven.testing.vm_image

lint: venv
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

integration: k8s guest web-libs
	$(BIN)/pytest tests/integration $(PYTEST_ARGS)

bench: k8s web-libs
	$(BIN)/python bench/watch_bench.py
	$(BIN)/python bench/inventory_bench.py
	$(BIN)/python bench/sync_bench.py
	$(BIN)/python bench/network_bench.py
	$(BIN)/python bench/run_bench.py
	$(BIN)/python bench/apply_bench.py
	$(BIN)/python bench/vif_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .kuberaven $(WEB_LIBS)/node_modules
