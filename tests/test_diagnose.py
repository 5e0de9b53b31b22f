"""`mrtpo diagnose` and the measurements it shares with the trainer: generation entropies, pooled ratios, verdict."""

import math

import pandas as pd
import pytest
import torch

from mrtpo.analysis import diagnostics as D
from mrtpo.analysis.diagnose import verdict
from mrtpo.method.relevance import token_entropy
from mrtpo.method.regions import check_region_ratio, outside_ratio, pooled_shares
from mrtpo.method.relevance import record_entropies
from mrtpo.models.sampling import prompt_ids, sample


def test_generation_entropies_equal_a_forward_on_the_sampled_tokens(smoke_policy):
    from transformers import AutoModelForCausalLM

    path, tok = smoke_policy
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    prompts = [[{"role": "user", "content": "Which city ?"}], [{"role": "user", "content": "a b c"}]]
    with record_entropies(model, temperature=0.7) as steps:
        samples = sample(model, tok, prompts, n=2, temperature=0.7, max_new_tokens=6, seed=0)
    generated = torch.stack(steps, 1)
    assert generated.shape[0] == 4 and generated.shape[1] >= max(len(ids) for s in samples for ids, _ in s)
    for i, prompt in enumerate(prompts):
        for j, (ids, _) in enumerate(samples[i]):
            pid = prompt_ids(tok, prompt)
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([pid + list(ids)])).logits[0, len(pid) - 1 : len(pid) - 1 + len(ids)]
            expected = token_entropy(logits, temperature=0.7)
            assert torch.allclose(generated[2 * i + j, : len(ids)], expected, atol=1e-4)
    with torch.no_grad():
        model(input_ids=torch.tensor([[1, 2]]))
    assert len(steps) == generated.shape[1]  # the hook is gone after the block


def test_check_region_ratio_pools_shares_over_responses():
    """Hand example: response 1 has 1 of 10 tokens in its region holding 1 of its shift 2; response 2 has 6 of 10
    tokens in its region holding 1.5 of its shift 6."""
    loc = pd.DataFrame({"shift_inside": [1.0, 1.5], "shift_total": [2.0, 6.0], "tokens_inside": [1, 6], "tokens_total": [10, 10]})
    pooled = (2.5 / 8) / (7 / 20)  # PAPER.md §7: (sum q inside / sum q) / (tokens inside / tokens)
    assert check_region_ratio(loc) == pytest.approx(pooled) == pytest.approx(0.8929, abs=1e-4)
    assert pooled_shares(loc) == (pytest.approx(0.3125), pytest.approx(0.35))
    # the same number as mean q over the set's region tokens / mean q over all its tokens
    assert check_region_ratio(loc) == pytest.approx((2.5 / 7) / (8 / 20))
    # not the mean of per-response ratios, which the small region inflates: (5 + 0.417) / 2
    per_response = (loc["shift_inside"] / loc["shift_total"]) / (loc["tokens_inside"] / loc["tokens_total"])
    assert per_response.mean() == pytest.approx(2.7083, abs=1e-4)
    # nor the ratio of per-response shares averaged over responses (a response with little shift weighs alike)
    mean_shares = (loc["shift_inside"] / loc["shift_total"]).mean() / (loc["tokens_inside"] / loc["tokens_total"]).mean()
    assert mean_shares == pytest.approx(0.375 / 0.35) != pytest.approx(pooled)
    assert math.isnan(check_region_ratio(loc.iloc[:0]))
    assert math.isnan(check_region_ratio(loc.assign(tokens_inside=0)))  # no region tokens
    uniform = {"shift_inside": torch.tensor([1.0, 6.0]), "shift_total": torch.tensor([10.0, 10.0]),
               "tokens_inside": torch.tensor([1.0, 6.0]), "tokens_total": torch.tensor([10.0, 10.0])}
    assert check_region_ratio(uniform) == pytest.approx(1.0)  # tensors too; uniform q: no better than uniform


def test_region_ratios_se_resamples_prompts_not_responses():
    """The bootstrap s.e. of the check-region ratio and of the ratio outside: with one response per prompt it is
    the bootstrap over responses; copies of a prompt's responses add no information and leave it unchanged
    (resampling the copies one by one would halve it)."""
    import numpy as np

    from mrtpo.analysis import stats

    rng = np.random.default_rng(0)
    n = 64
    total = rng.uniform(1.0, 3.0, n)
    tokens_inside = rng.integers(2, 8, n)
    loc = {"shift_inside": total * rng.uniform(0.2, 0.8, n), "shift_total": total, "tokens_inside": tokens_inside,
           "tokens_total": np.full(n, 20)}
    se_ratio, se_out = D.region_ratios_se(loc, np.arange(n))
    by_response = stats.bootstrap_se(lambda i: np.array([check_region_ratio({c: np.asarray(v)[i] for c, v in loc.items()}),
                                                         outside_ratio({c: np.asarray(v)[i] for c, v in loc.items()})]), n)
    assert (se_ratio, se_out) == (pytest.approx(by_response[0]), pytest.approx(by_response[1]))
    assert 0 < se_ratio < 0.5 * check_region_ratio(loc)
    copies = {c: np.repeat(v, 4) for c, v in loc.items()}
    assert check_region_ratio(copies) == pytest.approx(check_region_ratio(loc))
    clustered = D.region_ratios_se(copies, np.repeat(np.arange(n), 4))
    assert clustered[0] == pytest.approx(se_ratio, rel=0.15) and clustered[1] == pytest.approx(se_out, rel=0.15)
    assert D.region_ratios_se(copies, np.arange(4 * n))[0] < 0.7 * se_ratio
    assert all(math.isnan(x) for x in D.region_ratios_se(loc, np.zeros(n)))  # one prompt: no s.e.
    uniform = {**loc, "shift_inside": 0.1 * tokens_inside, "shift_total": np.full(n, 2.0)}  # q = 0.1 on every token
    assert check_region_ratio(uniform) == pytest.approx(1.0) and outside_ratio(uniform) == pytest.approx(1.0)


def test_diagnose_figures_use_the_pooled_check_region_ratio():
    """``summarise`` on two responses of one group: padding never counts, and the ratio is the pooled one."""
    from mrtpo.analysis.diagnose import summarise

    class Chars:  # one token per character: token i spans [i, i + 1)
        def decode(self, ids, skip_special_tokens=True):
            return "".join(map(chr, ids))

    class OneReward:
        def reward_funcs(self):
            def a(prompts, completions, **kw):
                return [0.0] * len(prompts)
            return [a]

        def check_regions(self, text, row):
            return {"a": [(0, 1)]}  # the first token

        def reward_label(self, name, example):
            return name

    texts = ["xxxx", "yyy"]
    ids = torch.tensor([[ord("x")] * 4, [ord("y")] * 3 + [0]])
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 1, 0]])
    q = torch.tensor([[[1.0, 1, 0, 0]], [[0.0, 0, 3, 5]]])  # the 5 sits on padding
    out = summarise(OneReward(), [{}, {}], texts, ids, mask, torch.tensor([[0.0], [1.0]]), torch.ones(2, 1, dtype=torch.bool),
                    q, torch.zeros(2, 4), Chars(), num_generations=2, step_prompts=1, beta=0.5)
    pooled = (1 / 5) / (2 / 7)  # shift inside 1 of 5 (padding excluded), region tokens 2 of 7
    assert out["rewards"]["a"]["check_region_ratio"] == pytest.approx(pooled)
    assert out["overall"]["check_region_ratio"] == pytest.approx(pooled)
    assert pooled != pytest.approx(((1 / 2) / (1 / 4) + 0.0) / 2)  # the mean of per-response ratios: 1.0
    # the per-response rows the diagnosis keeps give the same pooled ratio (Table 4's rows are computed from them)
    from mrtpo.analysis.diagnose import response_localisation
    from mrtpo.analysis.localisation import region_table

    loc = response_localisation(OneReward(), [{}, {}], texts, [[ord("x")] * 4, [ord("y")] * 3], torch.tensor([[0.0], [1.0]]),
                                q, torch.zeros(2, 4), torch.ones(2, 1, dtype=torch.bool), ["a"], Chars())
    assert list(loc["tokens_total"]) == [4, 3] and region_table(loc)["ratio"].iloc[0] == pytest.approx(pooled)


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
    # the per-response localisation beside it (no response replayed at 16 samples of the smoke policy: no rows),
    # read back with the diagnosis
    from mrtpo.analysis.diagnose import read_diagnosis

    assert read_diagnosis("sql", "smoke", folder=tmp_path) is None  # no such file: "d.json" was written
    out.rename(tmp_path / "sql-smoke.json")
    (tmp_path / "d.localisation.csv").rename(tmp_path / "sql-smoke.localisation.csv")
    again, loc = read_diagnosis("sql", "smoke", folder=tmp_path)
    assert again == d and {"profile", "reward", "label", "reward_value", "shift_inside"} <= set(loc.columns)
    assert len(loc) == sum(r["profiles"] for r in d["rewards"].values() if r["check_region_ratio"] is not None)
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
    # the sums the pooled shares are made of: all of q and every token, the region's part of them
    assert loc.loc["format", "shift_total"] == pytest.approx(float((1 - q).sum()), rel=1e-5)
    assert (loc["tokens_total"] == len(ids)).all() and (loc["tokens_inside"] <= loc["tokens_total"]).all()
    assert (loc["shift_inside"] <= loc["shift_total"] + 1e-6).all() and (loc["think_shift"] > 0).all()
    del profile["entropy"]
    assert D.localisation([profile], get_task("sql"), tok)["entropy_corr"].isna().all()  # older runs: not saved


def test_cli_diagnose_takes_a_dial_base(tmp_path):
    import json

    from mrtpo.cli import main
    from mrtpo.tasks import get_task
    from mrtpo.models.recipe import dial_recipe
    from mrtpo.models.tiny import tiny_path

    out = tmp_path / "d.json"
    main(["diagnose", "--task", "sql", "--model", "smoke", "--samples", "8", "--dial", "0.8", "--out", str(out)])
    d = json.loads(out.read_text())
    assert d["dial"] == 0.8 and d["base"] == tiny_path(get_task("sql"), "smoke", recipe=dial_recipe(get_task("sql"), 0.8, size="smoke")).name
    with pytest.raises(SystemExit, match="not a tiny size"):
        main(["diagnose", "--task", "sql", "--model", "7b", "--dial", "0.8"])
    with pytest.raises(SystemExit, match="gated-noise rate"):
        main(["diagnose", "--task", "sql", "--model", "smoke", "--dial", "1.5"])


def test_mechanism_table_reads_the_committed_diagnoses_and_says_what_is_missing():
    from mrtpo.analysis.diagnose import MECHANISM, mechanism_table, read_diagnosis

    table = mechanism_table(["if"], ["tiny", "no-such-model"]).set_index("model")
    d, _ = read_diagnosis("if", "tiny")
    assert table.at["tiny", "responses"] == d["samples"] and table.at["tiny", "verdict"] == d["verdict"]
    assert table.at["tiny", MECHANISM["check_region_ratio"]] == pytest.approx(d["overall"]["check_region_ratio"])
    assert table.at["no-such-model", "verdict"] == "not measured: mrtpo diagnose --task if --model no-such-model"
