# rlnotes: `make book` builds the HTML book, `make test` runs everything CI checks.
# Both create the virtual environment .venv on first use (Python 3.11, exact pins).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rlnotes-installed
# Kernels and tests run single-threaded BLAS/torch: faster on small problems, steadier timings.
export OPENBLAS_NUM_THREADS := 1
export OMP_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1
BOOK_ENV := RLNOTES_PROGRESS=0

.PHONY: help install book book-all test test-unit test-bench test-build test-nbval test-browser strip lab student student-book clean
.DEFAULT_GOAL := help

help:
	@echo "make book          build the HTML book into _build/html (sets up .venv first)"
	@echo "make test          everything CI checks: unit tests, strict build, nbval, browser test"
	@echo "make lab           open the notebooks in JupyterLab (installs it into .venv once)"
	@echo "make student       write the student edition (solutions stubbed) to student_edition/"
	@echo "make student-book  build the student edition's HTML book into student_edition/_build/html"
	@echo "make strip         remove outputs from the chapter notebooks before committing"
	@echo "make clean         remove _build and student_edition"

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c 'import sys; assert sys.version_info[:2] >= (3, 10), "rlnotes needs Python >= 3.10 (3.11 is tested)"'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

install: $(STAMP)

# Strict: a Sphinx warning or a failing notebook cell fails the build. Executed notebooks are
# cached in _build/.jupyter_cache and re-run only when their code changes.
book: $(STAMP)
	$(BOOK_ENV) $(BIN)/jupyter-book build . -W -n --keep-going
	@echo "Open _build/html/index.html in a browser."

# Re-execute every notebook (the cache does not notice changes to the rlnotes package).
book-all: $(STAMP)
	rm -rf _build/.jupyter_cache
	$(BOOK_ENV) $(BIN)/jupyter-book build . -W -n --keep-going --all

test: $(STAMP)
	bash tools/ensure_chromium.sh
	$(MAKE) --no-print-directory test-unit
	$(MAKE) --no-print-directory test-bench
	$(MAKE) --no-print-directory book-all
	$(MAKE) --no-print-directory test-nbval
	$(MAKE) --no-print-directory test-browser
	@echo "make test: all checks passed"

test-unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q

# GAE batched over environments must beat a naive double loop by at least 20x.
test-bench: $(STAMP)
	$(BIN)/python benchmarks/bench_gae.py

test-nbval: $(STAMP)
	$(BOOK_ENV) $(BIN)/python -m pytest --nbval-lax --nbval-current-env book -q

test-browser: $(STAMP)
	$(BIN)/python -m pytest tests/browser -q

strip: $(STAMP)
	$(BIN)/python tools/strip_notebooks.py book

lab: $(STAMP)
	@$(BIN)/python -c "import jupyterlab" 2>/dev/null || $(BIN)/python -m pip install --quiet jupyterlab==4.6.6
	$(BIN)/jupyter lab book

student: $(STAMP)
	$(BIN)/python -m rlnotes.exercises student student_edition

student-book: student
	$(BIN)/python -m rlnotes.exercises student-book student_edition

clean:
	rm -rf _build student_edition
