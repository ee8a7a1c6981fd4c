# Set-up is automatic: every target that runs code first makes `.venv/` (idempotent).
# On a machine that already has torch/triton/pandas/matplotlib/PyYAML (e.g. a GPU box with
# no network), pass PYTHON=python3 to use that interpreter as it is and skip the venv.

SCENARIO ?= nonspec
ARGS ?=
RUN ?=
DEVICE ?= auto
TORCH_VERSION ?= 2.13.0

VENV := .venv
ifeq ($(strip $(PYTHON)),)
PY := $(VENV)/bin/python
SETUP := $(VENV)/.installed
else
PY := $(PYTHON)
SETUP :=
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
endif

.PHONY: setup test lint format bench gate baseline report gpu-check kernels-bench clean

setup: $(SETUP)

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	# The CPU build of torch lies on this machine's disk; pin it so pip never pulls a CUDA build.
	$(VENV)/bin/python -m pip install -q "torch==$(TORCH_VERSION)"
	$(VENV)/bin/python -m pip install -q -e ".[dev]" "torch==$(TORCH_VERSION)"
	touch $@

test: $(SETUP)
	$(PY) -m ruff check harness kernels tests
	$(PY) -m pytest -q
	$(PY) -m harness gate --device emu

lint: $(SETUP)
	$(PY) -m ruff check harness kernels tests
	$(PY) -m ruff format --check harness kernels tests

format: $(SETUP)
	$(PY) -m ruff format harness kernels tests
	$(PY) -m ruff check --fix harness kernels tests

bench: $(SETUP)
	$(PY) -m harness bench --scenario $(SCENARIO) --device $(DEVICE) $(ARGS)

gate: $(SETUP)
	$(PY) -m harness gate --device $(DEVICE) $(ARGS)

baseline: $(SETUP)
	$(PY) -m harness baseline --device emu $(ARGS)

report: $(SETUP)
	$(PY) -m harness report $(RUN) $(ARGS)

gpu-check: $(SETUP)
	$(PY) -m harness.sync.gpucheck $(ARGS)

kernels-bench: $(SETUP)
	$(PY) -m pytest benchmarks -q --benchmark-only $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
