# One command each: `make demo` trains the main example, `make test` runs the whole suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/dqn_cartpole.py

test: $(STAMP)
	$(PY) -m pytest tests -q

lint: $(STAMP)
	$(PY) -m pip install --quiet ruff
	$(PY) -m ruff check parl tests examples benchmarks
	$(PY) -m ruff format --check parl tests examples benchmarks

bench: $(STAMP)
	$(PY) benchmarks/throughput.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
