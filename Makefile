# Two set-up commands: `make book` and `make test`. Both create .venv when it is missing.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
NLTK_DIR := $(abspath ../shared/data/nltk_data)
ifneq ($(wildcard $(NLTK_DIR)),)
export NLTK_DATA := $(NLTK_DIR)
endif

.PHONY: install test book book-check reproduce bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch pinned first: the CPU build of 2.13.0 lies on disk on the project's machines, and pyproject's range
	# (which 2.13.0 satisfies) then installs nothing more; an open range pulled a 2.14 CUDA build from PyPI
	$(BIN)/pip install -q --disable-pip-version-check "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
	$(BIN)/pip install -q --disable-pip-version-check -e ".[dev,book]" 2>&1 | grep -v "is ignored" || true
	# BFCL's data and AST checker; its declared dependencies are every API client, which the checker never uses
	$(BIN)/pip install -q --disable-pip-version-check --no-deps "bfcl-eval==2026.3.23" 2>&1 | grep -v "is ignored" || true
	$(BIN)/python -c "import mrtpo, trl, torch, bfcl_eval, if_verifiable; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

book: $(STAMP)
	$(BIN)/python -m mrtpo.book build

# every rendered page in headless Chromium: screenshots in _build/screenshots/, fails on what a reader should not see
book-check: $(STAMP)
	$(BIN)/python -m mrtpo.book check

reproduce: $(STAMP)
	$(BIN)/python -m mrtpo.book build --force

bench: $(STAMP)
	$(BIN)/python benchmarks/step_cost.py

clean:
	rm -rf _build book/executed
