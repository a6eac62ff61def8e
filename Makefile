# asr_pe: `make demo` trains and evaluates the default model on the embedded corpus;
# `make test` runs the test suite. Both create .venv and install the package first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.asr_pe-installed
# torch/torchaudio are pinned to the versions this project is tested with. PyPI's Linux torch 2.14.1
# wheel is the CUDA 13.0 build (needs NVIDIA driver >= 580, GPUs sm_75 and newer; ~3 GB of CUDA
# libraries). CPU=1 takes the CPU-only build from PyTorch's own index instead (`make install CPU=1`;
# --index-url, not --extra-index-url, so pip cannot fall back to PyPI's CUDA wheel; `torch==2.14.1`
# matches its local version 2.14.1+cpu). TORCH_PIN goes verbatim to pip, so any other build is e.g.
# (in a fresh venv: make clean-venv first; README "GPU / CUDA driver")
#   make install TORCH_PIN="torch==2.14.1+cu126 torchaudio==2.11.0+cu126 --index-url https://download.pytorch.org/whl/cu126"
CPU ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
ifeq ($(CPU),1)
TORCH_PIN ?= torch==2.14.1 torchaudio==2.11.0 --index-url $(TORCH_CPU_INDEX)
else
TORCH_PIN ?= torch==2.14.1 torchaudio==2.11.0
endif
TEST_ARGS ?=
# make test runs on TEST_WORKERS pytest-xdist workers (one math thread each: tests/conftest.py), a test
# file per worker at a time (--dist loadfile: a file's module fixtures, e.g. a trained run, are built
# once); TEST_WORKERS=0 runs in this process. test-all keeps one process: its DDP and signal tests time
# their own subprocesses
TEST_WORKERS ?= 2
# one CPU thread, as icefall and ESPnet train: on a busy 2-core machine (two other jobs) the demo's first
# steps took 3.5 s each with threads=1 and 15.4 s with torch's default of one thread per core; the
# digits recipes/synth/RESULTS.md archives are those of threads=1. DEMO_ARGS= takes torch's default.
DEMO_ARGS ?= threads=1

.PHONY: install demo test test-all bench gpu-check study clean-venv

install: $(STAMP)

$(STAMP): pyproject.toml
	@if [ "$(CPU)" != 1 ] && [ "$$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null 2>&1 \
	    && [ ! -e /proc/driver/nvidia/version ]; then \
	  echo "note: no NVIDIA driver found (no nvidia-smi): PyPI's torch is the CUDA 13 build, ~3 GB of CUDA" \
	       "libraries this machine cannot use. For the CPU build: make clean-venv && make install CPU=1"; fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(TORCH_PIN)
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

demo: install
	@echo "make demo: 1200 training steps and an evaluation ($(DEMO_ARGS); DEMO_ARGS= for torch's threads); the"
	@echo "step line shows s/step and the ETA (3.5 s/step measured on one thread of a busy 2-core machine)."
	$(BIN)/python train.py experiment=demo $(DEMO_ARGS)

test: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(TEST_ARGS)

test-all: install
	$(BIN)/python -m pytest -q -m "" $(TEST_ARGS)

bench: install
	$(BIN)/python scripts/bench_attention.py

# The GPU check (asr_pe/bench/gpu_check.py, docs/benchmarks.md "On a GPU"): on a CUDA machine, within
# 8 minutes, gradients in bf16, every PE's step fused and written out, a 60-minute recording, both
# recipes' smoke runs; everything in $(GPU_CHECK_OUT), summary.md/.json rewritten after each step.
# Without CUDA (or with GPU_CHECK_ARGS=--dry) the same steps run tiny on CPU (about 3 minutes).
GPU_CHECK_OUT ?= gpu_check
GPU_CHECK_ARGS ?=
gpu-check: install
	$(BIN)/python scripts/gpu_check.py --out $(GPU_CHECK_OUT) $(GPU_CHECK_ARGS)

# The embedded length study: corpus + long-form set, 12 PEs x 2 seeds (two 1-thread runs at a time,
# 13-17 min each on 2 cores, ~2.9 h in all), then the archive of result files and the report in recipes/synth/study/
# (committed), with the inference remedies of stage 3 on the degrading PEs' runs (~1 min each).
# Resumable: re-running skips finished runs and finished remedy evaluations.
study: install
	PYTHON=$(BIN)/python recipes/synth/run.sh --stage 0 --stop_stage 0
	PYTHON=$(BIN)/python recipes/synth/run.sh --stage 2 --stop_stage 4 \
		--archive_dir recipes/synth/study/runs --report_dir recipes/synth/study

clean-venv:
	rm -rf $(VENV)
