# LLaMA Anatomy: `make book` builds everything, `make test` runs the checks, `make test-fast`
# the inner loop, `make test-slow` the slow tier. Each creates .venv from requirements.txt
# if it is missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WORKERS ?= 2
export PYTHONHASHSEED := 0
# Python keeps the bytecode it compiles, under .venv/pycache, even where the environment
# sets PYTHONDONTWRITEBYTECODE: the virtualenv is installed without bytecode, and every
# process `make test` starts (two test workers, a kernel per notebook, the book build, the
# subprocesses of the tests) would otherwise compile torch, pandas, scipy and matplotlib
# from source again: ~3 s of CPU each. The folder goes with the virtualenv.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache

.PHONY: venv corpus study chapters figures book publish gh-pages browser test test-fast test-slow lint \
	lint-book bench clean lab

# The pinned lines of requirements.txt, installed by uv (pinned there too) with torch's
# file chosen by pip; pip installs everything if uv cannot (tools/make_venv.sh says why).
$(STAMP): requirements.txt pyproject.toml tools/make_venv.sh
	tools/make_venv.sh $(VENV) $(PYTHON)
	touch $(STAMP)

venv: $(STAMP)

# The text task's corpus: Jane Austen's six novels from Debian's r-cran-janeaustenr,
# unpacked into .corpus/ (never committed; the package is kept beside the novels, for the
# test that reads its R database) and checked against the hashes in llamanat_core/data/corpus.py. Not root and apt cannot fetch: it stops with the command to run.
corpus: venv
	@tools/ensure_corpus.sh $(BIN)/python

# The study: every run of the plan; with the committed cache nothing is left to run.
study: venv corpus
	$(BIN)/llamanat study --workers $(WORKERS)

# Execute every chapter with papermill into artifacts/ (reads the committed study).
chapters: venv corpus
	$(BIN)/llamanat chapters

# The picture README.md shows: the reference decoder as `diagram.block_diagram` draws it
# (the same bytes every time; a test compares the committed file with the code).
figures: venv
	$(BIN)/python -m llamanat_core.book.diagram artifacts/figures/decoder.png

# The HTML book from the executed chapters. --all: a full rebuild, so warnings from
# unchanged pages are reported again and -W judges the whole book.
BOOK_BUILD = $(BIN)/jupyter-book build . -W -n --keep-going --all

book: study chapters figures
	$(BOOK_BUILD)
	@echo "book: _build/html/index.html"

# The published book: `make book`, then _build/html as the gh-pages branch (ghp-import),
# pushed to $(REMOTE) only when the repository has that remote (tools/publish.sh says
# which happened). `make gh-pages` does the second step alone, from an existing build.
REMOTE ?= origin

publish: book
	tools/publish.sh $(BIN) $(REMOTE)

gh-pages:
	tools/publish.sh $(BIN) $(REMOTE)

# nbval re-executes every committed artifact and compares its outputs: text, HTML and,
# through tests/nbval_figures.py, every figure byte for byte.
NBVAL = --nbval --nbval-sanitize-with nbval_sanitize.cfg --nbval-current-env \
	--nbval-cell-timeout 1800

# The tests and nbval's notebooks run in one session on $(WORKERS) processes (pytest-xdist),
# one torch thread each. Each notebook's cells stay together on one worker, the Ray tests
# share one, so two local Ray instances never start at once, and the browser tests share
# one browser (the scheduler is in tests/conftest.py).
PARALLEL = -n $(WORKERS)

lint: venv
	$(BIN)/ruff check llamanat_core tests benchmarks

# How long each document is against its target (README 120 lines, CONTRIBUTING 150, the
# code walk 1,600 words, a chapter 700 lines and 2,500 words) and the chapters' key
# sentences in bold: reported past the target, failing only 15 % past it. Advisory, so
# outside `make test`.
lint-book: venv
	$(BIN)/python tools/lint_book.py

# The browser test needs Chromium: installed (Debian's package) when missing and we are
# root; otherwise this stops before anything else with the one command to run.
browser:
	@tools/ensure_chromium.sh

# Every check but the slow tier, in order: Chromium present; lint; the book built from the
# committed chapters with warnings as errors, while the committed runs are re-fitted for
# their first steps on this CPU (`llamanat verify`, one core, about 25 s); then, verify
# still running, one session of the unit and pipeline tests, nbval on the committed
# chapters and the browser test on the pages just built (its waits for pages overlap other
# tests). Both must pass; verify's report is printed at the end.
VERIFY_LOG = _build/verify.log

test: browser venv corpus
	$(BIN)/ruff check llamanat_core tests benchmarks
	mkdir -p _build
	$(BIN)/llamanat verify > $(VERIFY_LOG) 2>&1 & verify=$$!; \
		$(BOOK_BUILD) || { wait $$verify; cat $(VERIFY_LOG); exit 1; }; \
		LLAMANAT_REQUIRE_BOOK=1 $(BIN)/python -m pytest tests artifacts/*.ipynb $(NBVAL) $(PARALLEL) \
			-m "not slow" --durations=20; tested=$$?; \
		wait $$verify; verified=$$?; cat $(VERIFY_LOG); test $$tested -eq 0 && test $$verified -eq 0

# The slow tier alone (tests marked `slow`: each chapter's tiny-budget fresh run but the
# one `make test` keeps). Run it after changing the chapter runner or the study's runner.
test-slow: venv corpus
	$(BIN)/python -m pytest tests -m slow $(PARALLEL)

# The inner loop (under 2 minutes): lint and the unit tests, eager, on $(WORKERS) processes, without the tiers
# marked in pyproject.toml (compile, notebook, browser, pool, slow). Not a substitute for
# `make test`.
FAST_TIERS = not compile and not notebook and not browser and not pool and not slow

test-fast: venv corpus
	$(BIN)/ruff check llamanat_core tests benchmarks
	LLAMANAT_COMPILE=0 $(BIN)/python -m pytest tests -q -m "$(FAST_TIERS)" $(PARALLEL)

# A reader's notebook: JupyterLab on chapters/ with the project's kernel (this venv's
# python3). The MyST sources open as notebooks through jupytext's contents manager, and
# the settings override makes a double-click open a .md file as a notebook, not as text.
# LAB_FLAGS are also what tests/test_lab.py starts its server with.
LAB_FLAGS = --ServerApp.root_dir=$(CURDIR) \
	--ServerApp.contents_manager_class=jupytext.TextFileContentsManager
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.d

lab: venv
	mkdir -p $(LAB_OVERRIDES)
	echo '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Jupytext Notebook"}}}' \
		> $(LAB_OVERRIDES)/llamanat-jupytext.json
	$(BIN)/jupyter lab $(LAB_FLAGS) --ServerApp.default_url=/lab/tree/chapters \
		$(if $(filter 0,$(shell id -u)),--allow-root)

bench: venv
	$(BIN)/python benchmarks/train_step.py

clean:
	rm -rf _build
