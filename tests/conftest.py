"""Shared fixtures: a smoke-size Qwen2 policy and tokenizer built in-process (no hub), and the data folder."""

import os
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    # several workers (``make test``): each, and the processes it starts (torchrun, notebook kernels), takes its
    # share of the cores instead of all of them; set before torch is imported
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, str(_share))

# property tests draw the same examples on every machine and every run (a fresh clone has no example database):
# a failure is reproducible, and CI cannot fail by the luck of the draw
settings.register_profile("reproducible", derandomize=True, database=None)
settings.load_profile("reproducible")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent (only on the project's machines)")
    return SHARED_DATA


CORPUS = [
    "Which city has the most people ? Answer with SQL .",
    "<think> count rows in city </think> <answer> SELECT name FROM city WHERE pop > 5 </answer>",
    "Verifier information : [format] use tags [match] SELECT 1",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z 0 1 2 3 4 5 6 7 8 9",
] * 4


@pytest.fixture(scope="session")
def smoke_policy(tmp_path_factory):
    """(model path, tokenizer): a 2-layer, hidden-32 Qwen2 saved to disk (TRL's reference model needs a path)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from mrtpo.models.tokenizer import build_tokenizer

    tok = build_tokenizer(CORPUS, vocab_size=300, min_frequency=1)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    path = tmp_path_factory.mktemp("smoke_policy")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path), tok
