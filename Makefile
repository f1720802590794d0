# One command each: `make demo` trains the main example, `make test` runs the whole suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): setup.py pyproject.toml constraints.txt parl/runtime/cooperative/_cooperative.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/dqn_cartpole.py

# Two worker processes (pytest-xdist): the tests that use Ray run in two groups, each one test after another
# in one worker (tests/conftest.py groups them), the others are spread over both. `-n 0` runs them in one process.
test: $(STAMP)
	$(PY) -m pytest tests -q -n 2 --dist loadgroup -m "not long"

# The long learning checks (tests marked `long`: example robots with budgets of 50k+ env steps, the four-rooms comparison), left out of
# `make test` to keep it under 15 minutes on two cores.
.PHONY: test-long
test-long: $(STAMP)
	$(PY) -m pytest tests -q -n 2 --dist loadgroup -m long

# ruff (lint and format) and mypy (types of parl/, configured in pyproject.toml), from the test extra.
lint: $(STAMP)
	$(PY) -m ruff check parl tests examples benchmarks parl_cli.py
	$(PY) -m ruff format --check parl tests examples benchmarks parl_cli.py
	$(PY) -m mypy

bench: $(STAMP)
	$(PY) benchmarks/throughput.py

# The fault campaign: every fatal path of `parl train` run for real, one row each (benchmarks/faults.py).
.PHONY: faults
faults: $(STAMP)
	$(PY) benchmarks/faults.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache parl/runtime/cooperative/*.so

# Stable-Baselines3 beside parl (benchmarks/compare.py): SB3 lives in a virtualenv of its own.
# torch goes in first and alone: `torch==2.13.0` is the CPU build; other torch specs pull CUDA's.
SB3_VENV := .venv-sb3
SB3_STAMP := $(SB3_VENV)/.installed
BENCH_COMPARE_ARGS ?= --side-cpus 1 0 --write

$(SB3_STAMP): benchmarks/requirements-sb3.txt
	$(PYTHON) -m venv $(SB3_VENV)
	$(SB3_VENV)/bin/pip install --quiet torch==2.13.0
	$(SB3_VENV)/bin/pip install --quiet -r benchmarks/requirements-sb3.txt
	touch $(SB3_STAMP)

$(SB3_VENV): $(SB3_STAMP)

.PHONY: bench-compare
bench-compare: $(STAMP) $(SB3_STAMP)
	$(PY) benchmarks/compare.py $(BENCH_COMPARE_ARGS)

# The heavy workloads (Atari DQN, SAC on HalfCheetah, PPO on Atari) beside SB3 (benchmarks/workloads.py).
.PHONY: bench-workloads
bench-workloads: $(STAMP) $(SB3_STAMP)
	$(PY) benchmarks/workloads.py --write
