# LLaMA Anatomy: `make book` builds everything, `make test` runs every check.
# Both create .venv from requirements.txt if it is missing (SPEC §2).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WORKERS ?= 2
export PYTHONHASHSEED := 0

.PHONY: venv study chapters book test lint bench clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

# The study: every run of the plan; with the committed cache nothing is left to run.
study: venv
	$(BIN)/llamanat study --workers $(WORKERS)

# Execute every chapter with papermill into artifacts/ (reads the committed study).
chapters: venv
	$(BIN)/llamanat chapters

book: study chapters
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "book: _build/html/index.html"

lint: venv
	$(BIN)/ruff check llamanat_core tests benchmarks

test: venv
	$(BIN)/ruff check llamanat_core tests benchmarks
	$(BIN)/python -m pytest tests

bench: venv
	$(BIN)/python benchmarks/train_step.py

clean:
	rm -rf _build
