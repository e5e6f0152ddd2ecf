# pebench from a fresh clone, in an environment of its own (.venv, made on first use, reused after):
#   make run    set up, then train and score one model: the README's first command
#   make test   set up, then lint (ruff), check the import layers (import-linter) and run the whole test suite
# The torch build is the CPU one by default; on a CUDA machine pick yours, e.g.
#   make TORCH="torch --index-url https://download.pytorch.org/whl/cu126" test
# (a new TORCH needs `make clean-venv` first, or a VENV of its own: make VENV=.venv-cuda ...).

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: run test clean-venv

# The environment is made again only when pyproject.toml changes.
$(BIN)/pebench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check $(TORCH)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
	touch $@

run: $(BIN)/pebench
	$(BIN)/pebench run --encoding flow --task copy

test: $(BIN)/pebench
	$(BIN)/ruff check pebench
	$(BIN)/ruff format --check pebench
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

clean-venv:
	rm -rf $(VENV)
