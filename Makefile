# The GitOps loop (lint, plan, apply, run) acts on this repository's monitors;
# developer targets (test, check, bench) get names that cannot collide with it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lint plan apply run test fuzz check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev,mcp]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/monitors lint

plan: $(STAMP)
	$(BIN)/monitors plan

apply: $(STAMP)
	$(BIN)/monitors apply

run: $(STAMP)
	$(BIN)/monitors lint
	$(BIN)/monitors plan
	$(BIN)/monitors run --demo

# The suite mostly waits on real daemons, subprocesses and timeouts, so it runs in 4
# pytest-xdist workers (a file's tests stay in one worker); `TEST_WORKERS=0 make test`
# runs it in one process. A single file: `.venv/bin/pytest tests/path -q`.
TEST_WORKERS ?= 4

test: $(STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

# The config-stage fuzz test with the long hypothesis profile (tens of thousands of
# mutated files; `make test` runs the same test for a few seconds).
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest tests/config/test_fuzz.py -o timeout=0 -p no:cacheprovider

check: $(STAMP)
	$(BIN)/ruff check reconciler tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/lint_scale.py
	$(BIN)/python bench/plan_scale.py
	$(BIN)/python bench/engine_scale.py
	$(BIN)/python bench/reconcile_latency.py
	$(BIN)/python bench/http_load.py

clean:
	rm -rf $(VENV) .history .hypothesis
