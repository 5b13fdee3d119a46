# The GitOps loop (lint, plan, apply, run) acts on this repository's monitors;
# developer targets (test, check, bench) get names that cannot collide with it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lint plan apply run test check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev]'
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

test: $(STAMP)
	$(BIN)/pytest

check: $(STAMP)
	$(BIN)/ruff check reconciler tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/lint_scale.py
	$(BIN)/python bench/engine_scale.py
	$(BIN)/python bench/reconcile_latency.py

clean:
	rm -rf $(VENV) .history
