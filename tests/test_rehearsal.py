"""The paper path rehearsed: ``-p model rehearsal`` runs every arm of the ablation notebook through the functions
``-p model 7b`` takes (Spider train, the real benchmarks, the planned geometry), on a random-weight Qwen2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def test_rehearsal_spec_keeps_the_paper_settings():
    from mrtpo.models import model_spec
    from mrtpo.tasks import get_task

    spec = model_spec(get_task("sql"), "rehearsal")
    paper = get_task("sql").paper_run
    assert spec.num_generations == paper["num_generations"] and spec.learning_rate == paper["learning_rate"]
    assert spec.checkpoint.startswith("rehearsal-v") and spec.eval_limit == 4


def test_rehearsal_base_is_a_qwen2_with_chatml(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    from mrtpo.models.rehearsal import build_rehearsal
    from mrtpo.tasks import get_task

    path = build_rehearsal(get_task("sql", db_cache_dir=tmp_path / "db"), tmp_path / "r")
    config, tok = AutoConfig.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    assert config.model_type == "qwen2" and config.num_key_value_heads < config.num_attention_heads
    assert str(config.dtype).endswith("bfloat16") and not config.tie_word_embeddings
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert len(tok("<think> <tool_call>", add_special_tokens=False).input_ids) == 3  # tags are single tokens


@pytest.mark.skipif(not (DATA / "spider" / "train_spider_syn.json").is_file(), reason="../shared/data absent")
def test_table5_notebook_runs_with_the_rehearsal_model_every_arm_a_two_process_job(tmp_path):
    """The paper path's notebook as a user with GPUs runs it, on CPU processes (issue 43 item 5): the kernel launches
    every missing arm with accelerate launch on 2 gloo processes and reads the folders they write."""
    papermill = pytest.importorskip("papermill")
    env = {**os.environ, "MRTPO_RESULTS": str(tmp_path / "results"), "MRTPO_CACHE": str(tmp_path / "cache"),
           "MRTPO_DATA_DIR": str(DATA), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    out = tmp_path / "table5.ipynb"
    subprocess.run([sys.executable, "-m", "papermill", str(ROOT / "notebooks" / "table5_ablation.ipynb"), str(out),
                    "-p", "model", "rehearsal", "-p", "steps", "1", "-p", "processes", "2", "--cwd", str(ROOT / "notebooks")],
                   check=True, env=env, capture_output=True, timeout=1500)
    assert papermill is not None
    folders = sorted((tmp_path / "results" / "runs" / "sql" / "rehearsal").iterdir())
    methods = {json.loads((f / "config.json").read_text())["config"]["method"] for f in folders}
    assert methods == {"gdpo", "mrtpo", "joint", "shuffled", "entropy"}
    for f in folders:
        assert "spider_dev" in json.loads((f / "eval.json").read_text())
        assert json.loads((f / "summary.json").read_text())["processes"] == 2
