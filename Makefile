# Set-up is automatic: every target that runs code first makes `.venv/` (idempotent).
# On a machine that already has torch/triton/pandas/matplotlib/PyYAML (e.g. a GPU box with
# no network), pass PYTHON=python3 to use that interpreter as it is and skip the venv.

SCENARIO ?= nonspec
ARGS ?=
RUN ?=
DEVICE ?= auto
# Baselines are counted on the emulated device; compare like with like unless told otherwise.
GATE_DEVICE ?= emu
GPU_OUT ?= results/gpu
TORCH_VERSION ?= 2.13.0

VENV := .venv
# What a project that adopts the sync ledger has: torch and pytest, nothing of the harness. The
# ledger's wheel is installed beside it by tests/integration/test_adopter_wheel.py.
ADOPTER := $(VENV)/adopter
ifeq ($(strip $(PYTHON)),)
PY := $(VENV)/bin/python
SETUP := $(VENV)/.installed $(ADOPTER)/.installed
ADOPTER_VENV := $(ADOPTER)
else
PY := $(PYTHON)
SETUP :=
ADOPTER_VENV :=
export PYTHONPATH := $(CURDIR):$(CURDIR)/syncledger/src$(if $(PYTHONPATH),:$(PYTHONPATH))
endif

LINT_PATHS := harness kernels syncledger tests benchmarks examples

# A value as one shell word, whatever it holds (spaces, quotes, non-ASCII): 'it'\''s'.
quote = '$(subst ','\'',$(1))'
# RUN is optional (empty: the newest complete run), so it is passed only when given.
RUN_ARG = $(if $(RUN),$(call quote,$(RUN)))
# pytest-xdist workers for `make test` (two pay on two cores; idle ones steal queued tests);
# without pytest-xdist in $(PY) the suite runs in one process
TEST_WORKERS ?= 2

.PHONY: setup test lint format bench gate baseline report trace notebooks gpu-check repeats-proof \
	kernels-gpu metadata-bench clean

setup: $(SETUP)

# pip byte-compiles what it installs one file at a time; compiling afterwards on every core is
# quicker. Left to compile when first imported: the packages' own test suites, pip and
# setuptools, and transformers' model zoo (a run imports only the models it loads): two fifths
# of the files, of which a run imports a few.
compile = $(1)/bin/python -c "import compileall, re, sysconfig; \
	compileall.compile_dir(sysconfig.get_paths()['purelib'], quiet=2, workers=0, \
	rx=re.compile(r'/(tests?|pip|setuptools)/|/transformers/models/'))"

$(VENV)/.installed: pyproject.toml syncledger/pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	# The CPU build of torch lies on this machine's disk; pin it so pip never pulls a CUDA build.
	$(VENV)/bin/python -m pip install -q --no-compile -e ./syncledger -e ".[dev]" "torch==$(TORCH_VERSION)"
	$(call compile,$(VENV))
	# upstream sglang's releases that `fidelity --execute` runs: their files only, no dependencies
	$(VENV)/bin/python -c "from harness.upstream.releases import install_default_releases as i; i()"
	touch $@

$(ADOPTER)/.installed:
	python3 -m venv $(ADOPTER)
	$(ADOPTER)/bin/python -m pip install -q --no-compile "torch==$(TORCH_VERSION)" pytest
	$(call compile,$(ADOPTER))
	touch $@

# The strict sync gate is a test (tests/integration/test_gate_strict.py): it shares its count passes with
# the fidelity tests. Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set: each worker
# and each process a test starts would compile the project and pytest re-rewrite its modules
# (about 3 s a process here).
test: $(SETUP)
	$(PY) -m ruff check $(LINT_PATHS)
	$(PY) -m ruff format --check $(LINT_PATHS)
	env -u PYTHONDONTWRITEBYTECODE ADOPTER_VENV=$(ADOPTER_VENV) $(PY) -m pytest -q $$($(PY) -c "import xdist" 2>/dev/null && echo --numprocesses=$(TEST_WORKERS) --dist=worksteal)

lint: $(SETUP)
	$(PY) -m ruff check $(LINT_PATHS)
	$(PY) -m ruff format --check $(LINT_PATHS)

format: $(SETUP)
	$(PY) -m ruff format $(LINT_PATHS)
	$(PY) -m ruff check --fix $(LINT_PATHS)

bench: $(SETUP)
	$(PY) -m harness bench --scenario $(call quote,$(SCENARIO)) --device $(call quote,$(DEVICE)) $(ARGS)

gate: $(SETUP)
	$(PY) -m harness gate --device $(call quote,$(GATE_DEVICE)) $(ARGS)

baseline: $(SETUP)
	$(PY) -m harness baseline --device emu $(ARGS)

report: $(SETUP)
	$(PY) -m harness report $(RUN_ARG) $(ARGS)

trace: $(SETUP)
	$(PY) -m harness trace $(RUN_ARG) $(ARGS)

notebooks: $(SETUP)
	$(PY) -m harness notebooks $(RUN_ARG) $(ARGS)

# GPU checks: every check registered to give the GPU's verdict (`python -m harness check
# --list`), each into $(GPU_OUT)/NAME; all run, and the target fails when any failed. Without a
# GPU it is refused at once, before any set-up, and nothing is written.
ifneq ($(filter gpu-check,$(MAKECMDGOALS)),)
ifeq ($(shell nvidia-smi -L 2>/dev/null | grep -c '^GPU'),0)
$(error gpu-check needs an NVIDIA GPU and nvidia-smi lists none: nothing was run or written)
endif
endif
gpu-check: $(SETUP)
	$(PY) -m harness check --all $(call quote,$(GPU_OUT))

# Do answers survive a rerun? Three invocations of specv2_mirror with --repeats 5, compared
# pairwise, every run's A/A arm and the half-width of each Δ
# (docs/scenarios.md#repeats-the-process-is-the-unit-of-replication), under
# $(GPU_OUT)/repeats_proof. REPEATS_PROOF_SETS sizes the runs (meant to take under 6 minutes on an H200).
REPEATS_PROOF_SETS ?= --set steps.time=100 --set 'serving.mirror=[auto]'
repeats-proof: $(SETUP)
	$(PY) -m harness repeats-proof --out $(call quote,$(GPU_OUT)/repeats_proof) \
		--device $(call quote,$(DEVICE)) $(REPEATS_PROOF_SETS) $(ARGS)

kernels-gpu: $(SETUP)
	$(PY) benchmarks/kernels_gpu.py --out $(call quote,$(GPU_OUT)/kernels) $(ARGS)

metadata-bench: $(SETUP)
	mkdir -p $(call quote,$(GPU_OUT))
	$(PY) -m pytest benchmarks/test_metadata_bench.py -q --benchmark-only \
		--benchmark-max-time=0.2 --benchmark-min-rounds=30 \
		--benchmark-json=$(call quote,$(GPU_OUT)/metadata_bench.json) $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
