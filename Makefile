# The project's single entry point. `make demo` is the main job; `make test` runs every test tier
# this machine can run (and says which it skipped and why).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(CURDIR)/.tools/bin
export PATH := $(BIN):$(CURDIR)/$(VENV)/bin:$(PATH)
# Test tiers whose runtimes the toolchain installer provides (see README, "Development").
TOOLCHAIN ?= helm kubeconform registry private-registry shellcheck checkov kube promtool slurm \
  slurm-26.05 nodes argocd-lua argocd uml

.PHONY: setup demo test lint unit schema images clean help
help:
	@echo "make setup | demo | test | lint | schema | images | clean"

$(VENV)/.installed: pyproject.toml tools/constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c tools/constraints.txt -e '.[dev]'
	touch $@

setup: $(VENV)/.installed
	$(PY) -m sunk.devenv.toolchain install $(TOOLCHAIN)

# The demo renders every example, then (as root) starts the control plane and two real
# Kubernetes nodes, installs both charts, runs a two-node job and leaves the cluster up
# (`sunkctl dev down` removes it).
demo: $(VENV)/.installed
	$(PY) -m sunk.devenv.toolchain install helm
	$(VENV)/bin/sunkctl demo
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "demo: a Slurm cluster on real nodes needs root (sudo make demo); rendered only"; \
	else \
	  $(PY) -m sunk.devenv.toolchain install kube nodes && $(VENV)/bin/sunkctl dev up; \
	fi

lint: setup
	$(VENV)/bin/ruff check tools tests images
	$(VENV)/bin/ruff format --check tools tests images
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/yamllint --strict -c .yamllint.yaml examples charts/slurm/values.yaml charts/sunk/values.yaml
	$(BIN)/helm lint --strict charts/sunk
	$(BIN)/helm lint --strict charts/slurm
	@if command -v shellcheck >/dev/null; then shellcheck -x .ci/run $$(git ls-files '*.sh'); \
	  else echo "lint: shellcheck not installed (apt-get install shellcheck); skipped"; fi

# Container images (images/): the debootstrapped base once, then controller, slurmd, login and
# operator with the charts' default tags (SLURM=26.05: the Slurm images of that release).
# Installs and starts a Docker engine when none answers.
images: setup
	$(PY) -m sunk.devenv.images build $(if $(SLURM),--slurm $(SLURM))

schema: setup
	$(VENV)/bin/sunkctl schema

# The images tier builds the images when needed (about 4 min from scratch on 2 busy cores, 2 s
# cached) and boots them (about 1 min). SUNK_TEST_IMAGES=0 leaves the Docker part to machines
# where the engine runs and the images are already built; it then skips and says so.
export SUNK_TEST_IMAGES ?= 1

# Two lanes side by side (sunk.devenv.test_lanes): the real-node tiers (e2e, faults), which
# mostly wait, beside every other tier. PYTEST_ARGS go to both; `$(PY) -m pytest -m TIER` runs
# one tier alone.
test: setup lint
	$(VENV)/bin/sunkctl schema --check
	$(PY) -m sunk.devenv.test_lanes $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .tools .pytest_cache .ruff_cache
