# Every target that runs something first makes sure .venv exists and holds the project: `run`
# the ledger and what it needs at run time only (RUN_STAMP), every other target the development
# tools too (STAMP, the `dev` extra: pytest, mypy, ruff, schemathesis, mutmut, py-spy...).
PYTHON    ?= $(shell command -v python3.11 || command -v python3)
VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed-stamp
RUN_STAMP := $(VENV)/.runtime-stamp
DB        ?= ./var/flowledger.db
# PORT: unset, the port is the settings' (8787 unless flowledger.toml says otherwise)
PORT      ?=

.PHONY: install run test check docs bench clean mutate n8n-node e2e-n8n e2e-prefect image-test

install: $(STAMP)

define venv
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
endef

# The development install holds the runtime one, so it stamps both.
$(STAMP): pyproject.toml
	$(venv)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml
	$(venv)
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/flowledger init --db $(DB)
	$(BIN)/flowledger run --db $(DB) $(if $(PORT),--port $(PORT))

# The suite runs on two workers per core (pytest-xdist): a worker spends much of its time
# waiting on fsync, PostgreSQL and the processes it starts (on 2 cores, 4 workers took the
# suite from 10 min 47 s to 9 min 21 s). The tests that stop and start the PostgreSQL server
# run afterwards, alone: every other PostgreSQL test would see it go away.
# Exit code 5 is pytest's "nothing selected" (PYTEST_ARGS naming files with no such test).
# Where PYTHONDONTWRITEBYTECODE is set, every worker and every process a test starts would
# compile the project again (collecting the tests took 15.8 s a worker instead of 8.5 s): the
# tests compile it once and keep the bytecode (__pycache__, ignored by git).
TEST_WORKERS ?= $(shell echo $$(( 2 * $$(nproc) )))
test: export PYTHONDONTWRITEBYTECODE =
test: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 flowledger
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not pg_restart" $(PYTEST_ARGS)
	$(BIN)/python -m pytest -m pg_restart $(PYTEST_ARGS) || [ $$? -eq 5 ]

check: $(STAMP)
	$(BIN)/ruff check flowledger tests bench e2e docs examples clients
	$(BIN)/ruff format --check flowledger tests bench e2e docs examples clients
	$(BIN)/mypy
	$(BIN)/mypy docs/generate.py
	$(BIN)/lint-imports --no-cache

# The generated reference: docs/commands.md from the command-line app, docs/settings.md from
# the settings models (tests/unit/test_docs_generated.py fails when they are stale), and the
# terminal UI's screenshot over the demo shift (docs/tui.svg).
docs: $(STAMP)
	$(BIN)/python docs/generate.py

# Benchmarks print figures measured in one run against a baseline; none is a test.
bench: $(STAMP)
	$(BIN)/python -m bench.transitions
	$(BIN)/python -m bench.ingest
	$(BIN)/python -m bench.http_floor
	$(BIN)/python -m bench.writer
	$(BIN)/python -m bench.sync
	$(BIN)/python -m bench.sweep
	$(BIN)/python -m bench.tui
	$(BIN)/python -m bench.verify
	$(BIN)/python -m bench.n8n_guard
	$(BIN)/python -m bench.client_guard

bench-%: $(STAMP)
	$(BIN)/python -m bench.$*

# The n8n node package (integrations/n8n): install from its lock file, build, lint, test.
n8n-node:
	cd integrations/n8n && npm ci && npm run build && npm run lint && npm test

# The n8n integration against a real n8n 2.41.1 (opt-in, never in CI; e2e/local_n8n.py says
# how to install one, and without it this prints that and skips).
e2e-n8n: $(STAMP)
	$(BIN)/python -m e2e.n8n

# The Prefect connector against a real Prefect 3.9 server on SQLite, installed into a venv of
# its own (opt-in, never in CI; e2e/prefect/__main__.py says what it checks).
e2e-prefect: $(STAMP)
	$(BIN)/python -m e2e.prefect

# The ledger's image (Containerfile) built with podman, or docker, and run on SQLite and on
# PostgreSQL: first look, SIGTERM under load, restart, its user, its health (opt-in, never in
# CI: it takes minutes; e2e/image/__main__.py says what it checks and where its base comes from).
image-test: $(STAMP)
	$(BIN)/python -m e2e.image

# Mutation testing of the pure rules against tests/unit ([tool.mutmut] in pyproject.toml), from
# a fresh mutants/ copy, then one line per mutated module. Not part of test or CI.
mutate: $(STAMP)
	rm -rf mutants && mkdir mutants
	$(BIN)/mutmut run --max-children 2 > mutants/run.log 2>&1 || { tail -n 40 mutants/run.log; exit 1; }
	@$(BIN)/mutmut results --all true | awk -F': ' \
	  '{ m = $$1; sub(/^ +/, "", m); sub(/\.[^.]*$$/, "", m); n[m]++; c[m, $$2]++ } \
	  END { printf "%-28s %8s %8s %8s %8s\n", "module", "mutants", "killed", "survived", "no tests"; \
	        for (m in n) printf "%-28s %8d %8d %8d %8d\n", m, n[m], c[m, "killed"], \
	          c[m, "survived"], c[m, "no tests"] | "sort" }'
	@echo "survivors: $(BIN)/mutmut results; one of them: $(BIN)/mutmut show <name>"

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
