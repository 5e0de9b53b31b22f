"""`mrtpo diagnose` and the measurements it shares with the trainer: generation entropies, pooled ratios, verdict."""

import math

import pytest
import torch

from mrtpo import diagnostics as D
from mrtpo.diagnose import pooled_ratio, verdict
from mrtpo.relevance import token_entropy


def test_generation_entropies_equal_a_forward_on_the_sampled_tokens(smoke_policy):
    from transformers import AutoModelForCausalLM

    path, tok = smoke_policy
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    prompts = [[{"role": "user", "content": "Which city ?"}], [{"role": "user", "content": "a b c"}]]
    with D.record_entropies(model, temperature=0.7) as steps:
        samples = D.sample(model, tok, prompts, n=2, temperature=0.7, max_new_tokens=6, seed=0)
    generated = torch.stack(steps, 1)
    assert generated.shape[0] == 4 and generated.shape[1] >= max(len(ids) for s in samples for ids, _ in s)
    for i, prompt in enumerate(prompts):
        for j, (ids, _) in enumerate(samples[i]):
            pid = D.prompt_ids(tok, prompt)
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([pid + list(ids)])).logits[0, len(pid) - 1 : len(pid) - 1 + len(ids)]
            expected = token_entropy(logits, temperature=0.7)
            assert torch.allclose(generated[2 * i + j, : len(ids)], expected, atol=1e-4)
    with torch.no_grad():
        model(input_ids=torch.tensor([[1, 2]]))
    assert len(steps) == generated.shape[1]  # the hook is gone after the block


def test_pooled_ratio_is_a_ratio_of_pooled_shares():
    q = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]])
    inside = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 1]], dtype=torch.bool)
    mask = torch.ones(2, 4)
    # shift inside 3 of 4, tokens inside 2 of 8
    assert pooled_ratio(q, inside, mask) == pytest.approx((3 / 4) / (2 / 8))
    assert pooled_ratio(torch.ones(2, 4), inside, mask) == pytest.approx(1.0)  # uniform q: no better than uniform
    assert math.isnan(pooled_ratio(torch.zeros(2, 4), inside, mask))
    mask[1, 3] = 0  # padding never counts, inside or not
    assert pooled_ratio(q, inside, mask) == pytest.approx((1 / 2) / (1 / 7))


def test_verdict_applies_the_readers_rule_and_names_specificity():
    low = verdict(2.9, 1.2, 0.78, 0.59)
    assert "half a point" in low and "not reward-specific" in low and "entropy arm" in low
    high = verdict(3.5, 1.2, 0.1, 0.2)
    assert "concentration >= 3x, not below both" in high and "profiles reward-specific" in high
    assert "ratio >= 2x, not below both" in verdict(2.0, 2.5, 0.1, 0.2)
    assert "unmeasured" in verdict(2.0, 1.0, float("nan"), float("nan"))
    assert "too few" in verdict(float("nan"), 1.0, 0.5, 0.5)


def test_cli_diagnose_writes_json_and_a_verdict(tmp_path, capsys):
    import json

    from mrtpo.cli import main

    out = tmp_path / "d.json"
    main(["diagnose", "--task", "sql", "--model", "smoke", "--samples", "16", "--out", str(out)])
    printed = capsys.readouterr().out
    d = json.loads(out.read_text())
    assert d["samples"] == 16 and d["num_generations"] == 8 and d["model"] == "smoke" and set(d["rewards"]) == {"format", "executable", "execution_match"}
    assert "verdict: " in printed and d["verdict"] in printed
    for r in d["rewards"].values():
        assert 0 <= r["replay_rate"] <= 1
    assert d["overall"]["entropy_mean"] > 0 and len(d["overall"]["s"]) == 0  # 16 samples: less than one step's batch
    with pytest.raises(SystemExit, match="unknown task"):
        main(["diagnose", "--task", "nope", "--samples", "16"])


def test_localisation_rows_carry_the_specificity_columns(smoke_policy):
    from mrtpo.tasks import get_task

    _, tok = smoke_policy
    text = "<think> count rows in city </think> <answer> SELECT name FROM city WHERE pop > 5 </answer>"
    ids = tok(text, add_special_tokens=False).input_ids
    g = torch.Generator().manual_seed(0)
    q = torch.rand(len(ids), generator=g)
    profile = {"step": 0, "example": {}, "completion": text, "completion_ids": ids, "rewards": {},
               "q": {"executable": q.tolist(), "execution_match": (2 * q).tolist(), "format": (1 - q).tolist()},
               "entropy": (3 * q + 1).tolist()}
    loc = D.localisation([profile], get_task("sql"), tok).set_index("reward")
    # executable: median of corr with 2q (1) and with 1 - q (-1) is 0; all of them follow the entropy exactly
    assert loc.loc["executable", "cross_reward_corr"] == pytest.approx(0.0, abs=1e-5)
    assert loc.loc["format", "cross_reward_corr"] == pytest.approx(-1.0, abs=1e-5)
    assert loc.loc["execution_match", "entropy_corr"] == pytest.approx(1.0, abs=1e-5)
    assert loc.loc["format", "entropy_corr"] == pytest.approx(-1.0, abs=1e-5)
    del profile["entropy"]
    assert D.localisation([profile], get_task("sql"), tok)["entropy_corr"].isna().all()  # older runs: not saved
