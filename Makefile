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
# JupyterLab (with MyST rendering) and nbgrader live in environments of their own, outside the
# repository and cached between runs and clones; their kernel is the book's .venv.
TOOLS_CACHE ?= $(HOME)/.cache/rlnotes
LAB_VERSION := 4.6.6
MYST_VERSION := 2.7.0
NBGRADER_VERSION := 0.9.6
LAB_VENV := $(TOOLS_CACHE)/lab-$(LAB_VERSION)-myst-$(MYST_VERSION)
NBGRADER_VENV := $(TOOLS_CACHE)/nbgrader-$(NBGRADER_VERSION)
LAB_KERNELS := $(abspath $(VENV))/lab/share/jupyter

.PHONY: help install book book-all pdf test-pdf test test-unit test-bench test-build test-nbval test-browser test-tools strip lab lab-env nbgrader-env student student-book clean peers-env bench-peers bench-peers-quick
.DEFAULT_GOAL := help

help:
	@echo "make book          build the HTML book into _build/html (sets up .venv first)"
	@echo "make pdf           build the book as one PDF, _build/latex/rlnotes.pdf (installs TeX Live"
	@echo "                   from Debian when missing and run as root)"
	@echo "make test          everything CI checks: unit tests, strict build, nbval, PDF, browser test"
	@echo "make lab           open the notebooks in JupyterLab with MyST rendering (installed once)"
	@echo "make student       the student kit in student_edition/: notebooks without solutions,"
	@echo "                   the rlnotes wheel (dist/) and a README for students"
	@echo "make student-book  build the student edition's HTML book into student_edition/_build/html"
	@echo "make strip         remove outputs from the chapter notebooks before committing"
	@echo "make clean         remove _build and student_edition"
	@echo "make bench-peers   race rlnotes against SB3 and TRL (installs them once; ~30 min);"
	@echo "                   bench-peers-quick: the quick form (~5 min)"

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c 'import sys; assert sys.version_info[:2] >= (3, 10), "rlnotes needs Python >= 3.10 (3.11 is tested)"'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps \
		--no-build-isolation -e .
	@touch $@

install: $(STAMP)

# Strict: a Sphinx warning or a failing notebook cell fails the build. Executed notebooks are
# cached in _build/.jupyter_cache and re-run only when their code changes.
book: $(STAMP)
	$(BOOK_ENV) $(BIN)/jupyter-book build . -W -n --keep-going
	@# _ext/pdf_link.py copies _build/latex/rlnotes.pdf into _build/html when it exists.
	@echo "Open _build/html/index.html in a browser."

# Re-execute every notebook (the cache does not notice changes to the rlnotes package).
book-all: $(STAMP)
	rm -rf _build/.jupyter_cache
	$(BOOK_ENV) $(BIN)/jupyter-book build . -W -n --keep-going --all

test: $(STAMP)
	bash tools/ensure_chromium.sh
	$(MAKE) --no-print-directory test-unit
	$(MAKE) --no-print-directory test-bench
	@# The strict build and nbval each execute every notebook, one kernel at a time: run them side
	@# by side on the two cores (each still executes every notebook in full).
	$(MAKE) --no-print-directory -j2 --output-sync=target book-all test-nbval
	$(MAKE) --no-print-directory test-pdf
	$(MAKE) --no-print-directory test-browser
	$(MAKE) --no-print-directory test-tools
	@echo "make test: all checks passed"

# The PDF: Jupyter Book's LaTeX builder with XeLaTeX, from the execution cache that `make book`
# fills (a notebook not in the cache is executed once, as for the HTML). When an HTML build exists,
# it is updated so that its front page links the PDF (copied to _build/html/rlnotes.pdf).
PDF := _build/latex/rlnotes.pdf
pdf: $(STAMP)
	bash tools/ensure_texlive.sh
	rm -f $(PDF)
	$(BOOK_ENV) $(BIN)/jupyter-book build . --builder pdflatex -W -n --keep-going
	@test -f $(PDF)
	@# Update the HTML (only its front page changes) so that it links the PDF.
	@if [ -f _build/html/index.html ]; then $(BOOK_ENV) $(BIN)/jupyter-book build . -W -n --keep-going; fi
	@echo "The PDF: $(PDF)"

# Builds the PDF (after `make book` or `book-all`, from their cache) and checks it with poppler.
test-pdf: pdf
	$(BIN)/python -m pytest tests/pdf -q

# Two workers (this machine has two cores); a test file stays on one worker, so its module fixtures
# are computed once.
test-unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q -n 2 --dist loadfile

# GAE batched over environments must beat a naive double loop by at least 20x.
test-bench: $(STAMP)
	$(BIN)/python benchmarks/bench_gae.py

test-nbval: $(STAMP)
	$(BOOK_ENV) $(BIN)/python -m pytest --nbval-lax --nbval-current-env book -q

test-browser: $(STAMP)
	$(BIN)/python -m pytest tests/browser -q

# nbgrader's own generate_assignment/autograde on our course, and JupyterLab rendering a chapter.
test-tools: lab-env nbgrader-env
	RLNOTES_LAB_VENV=$(LAB_VENV) RLNOTES_LAB_KERNELS=$(LAB_KERNELS) \
	RLNOTES_NBGRADER_VENV=$(NBGRADER_VENV) $(BIN)/python -m pytest tests/tools -q

strip: $(STAMP)
	$(BIN)/python tools/strip_notebooks.py book

$(LAB_VENV)/.installed:
	rm -rf $(LAB_VENV) && $(PYTHON) -m venv $(LAB_VENV)
	$(LAB_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		jupyterlab==$(LAB_VERSION) jupyterlab-myst==$(MYST_VERSION)
	@touch $@

# The kernel JupyterLab starts for the notebooks ("python3") is the book's .venv.
lab-env: $(STAMP) $(LAB_VENV)/.installed
	@$(BIN)/python -m ipykernel install --prefix $(abspath $(VENV))/lab --name python3 \
		--display-name "Python 3 (rlnotes)" >/dev/null 2>&1

lab: lab-env
	JUPYTER_PATH=$(LAB_KERNELS) $(LAB_VENV)/bin/jupyter lab book

$(NBGRADER_VENV)/.installed:
	rm -rf $(NBGRADER_VENV) && $(PYTHON) -m venv $(NBGRADER_VENV)
	$(NBGRADER_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		nbgrader==$(NBGRADER_VERSION)
	@touch $@

nbgrader-env: $(NBGRADER_VENV)/.installed

student: $(STAMP)
	$(BIN)/python -m rlnotes.exercises student student_edition --kit

student-book: student
	$(BIN)/python -m rlnotes.exercises student-book student_edition

clean:
	rm -rf _build student_edition

# The peers rlnotes races (benchmarks/peers/): Stable-Baselines3 + sb3-contrib, and TRL, each in an
# environment of its own outside the repository, made on first use; rlnotes itself goes into each
# (editable, no dependencies) so that both sides use the same evaluation code.
PEER_SB3_VENV := $(TOOLS_CACHE)/peers-sb3-2.9.2
PEER_TRL_VENV := $(TOOLS_CACHE)/peers-trl-1.16.0
PEER_ARGS ?=

$(PEER_SB3_VENV)/.installed: benchmarks/peers/requirements-sb3.txt
	rm -rf $(PEER_SB3_VENV) && $(PYTHON) -m venv $(PEER_SB3_VENV)
	$(PEER_SB3_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r benchmarks/peers/requirements-sb3.txt
	@touch $@

$(PEER_TRL_VENV)/.installed: benchmarks/peers/requirements-trl.txt
	rm -rf $(PEER_TRL_VENV) && $(PYTHON) -m venv $(PEER_TRL_VENV)
	$(PEER_TRL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r benchmarks/peers/requirements-trl.txt
	@touch $@

# rlnotes is (re)installed from this tree every time: the environments are shared between clones.
peers-env: $(STAMP) $(PEER_SB3_VENV)/.installed $(PEER_TRL_VENV)/.installed
	$(PEER_SB3_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
		--no-build-isolation -e .
	$(PEER_TRL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
		--no-build-isolation -e .

# Writes benchmarks/results/peers_cartpole.json and peers_grpo_step.json (the book's appendix
# renders them); the quick form writes to _build/peers-quick/. PEER_ARGS passes more options.
bench-peers: peers-env
	$(BIN)/python benchmarks/peers/race.py --sb3-python $(PEER_SB3_VENV)/bin/python \
		--trl-python $(PEER_TRL_VENV)/bin/python $(PEER_ARGS)

bench-peers-quick: peers-env
	$(BIN)/python benchmarks/peers/race.py --quick --sb3-python $(PEER_SB3_VENV)/bin/python \
		--trl-python $(PEER_TRL_VENV)/bin/python $(PEER_ARGS)
