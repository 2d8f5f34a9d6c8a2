# Every target that runs something first makes sure .venv exists and holds the project.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DB     ?= ./var/flowledger.db

.PHONY: install run test check bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/flowledger init --db $(DB)
	$(BIN)/flowledger run --db $(DB)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

check: $(STAMP)
	$(BIN)/ruff check ledger connectors tui tests bench
	$(BIN)/ruff format --check ledger connectors tui tests bench
	$(BIN)/mypy

# Benchmarks print figures measured in one run against a baseline; none is a test.
bench: $(STAMP)
	$(BIN)/python -m bench.transitions
	$(BIN)/python -m bench.ingest
	$(BIN)/python -m bench.sync
	$(BIN)/python -m bench.sweep
	$(BIN)/python -m bench.tui

bench-%: $(STAMP)
	$(BIN)/python -m bench.$*

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
