"""Held-out evaluation of a policy with a run's benchmarks and decodings.

``benchmarks(cfg)`` asks the task for its held-out sets (``Task.benchmarks``: the synthetic test split and
the hidden-value split at the tiny scale; Spider / IFEval / BFCL at the real scale); ``evaluate(cfg, path)``
samples from the policy at temperature 1 (``eval_samples`` per prompt) and greedily, and scores, over all prompts
and (``per_prompt=``) each prompt on its own; ``eval_rows`` flattens the result into tidy rows, and
``write_evaluation`` writes a run folder's evaluation files. A paper-scale run
missing one of the paper's evaluation files fails naming it (``require_benchmark_files``), rather than being evaluated
on the benchmarks that happen to be present.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from mrtpo.runs.config import RunConfig
from mrtpo.files.paths import data_root
from mrtpo.tasks.base import Benchmark


def missing_benchmark_files(cfg: RunConfig) -> list:
    """The task's paper evaluation files (``Task.paper_data`` of role "eval": loaded and scored here) absent from the
    data root, for a run that must have every one: a real-scale run evaluating whole benchmarks. The tiny scale reads
    none of them (synthetic test splits); a model whose registry entry has an ``eval_limit`` (the rehearsal, smollm2:
    a few prompts of each benchmark, not a comparison with the paper) takes the benchmarks present, as before."""
    if cfg.scale == "tiny" or cfg.spec.eval_limit is not None:
        return []
    root = data_root()
    return [f for f in cfg.task_def.paper_data if f.role == "eval" and not (root / f.path).is_file()]


def require_benchmark_files(cfg: RunConfig) -> None:
    """Raise ``FileNotFoundError`` naming each missing evaluation file (:func:`missing_benchmark_files`) and where to
    get it. A task's ``real_benchmarks`` loads the sets whose files are present (Spider's family and BIRD differ from
    machine to machine), so without this check a paper-scale run would be evaluated on fewer benchmarks than the
    paper's, silently; the runner calls it before training (``runs.train``) and :func:`evaluate` before loading."""
    missing = missing_benchmark_files(cfg)
    if missing:
        files = "; ".join(f"{data_root() / f.path} ({f.name}: get it from {f.source})" for f in missing)
        raise FileNotFoundError(
            f"task {cfg.task!r}, model {cfg.model!r}: {len(missing)} evaluation file(s) of the paper's benchmarks "
            f"missing under the data root {data_root()} ($MRTPO_DATA_DIR): {files}. Put each file there (the data "
            f"README lists the layout; `mrtpo plan --task {cfg.task} --model {cfg.model}` shows every file's status)")


def benchmarks(cfg: RunConfig) -> dict[str, Benchmark]:
    """name -> Benchmark(task, held-out Dataset, scorer) for this run's scale (``Task.benchmarks``); a model whose
    registry entry has an ``eval_limit`` (the rehearsal) takes that many prompts of each real benchmark."""
    out = cfg.task_def.benchmarks(cfg.scale, cfg.eval_prompts, cfg.eval_seed, data_root())
    limit = cfg.spec.eval_limit
    if limit is None:
        return out
    return {name: b._replace(data=b.data.select(range(min(limit, len(b.data))))) for name, b in out.items()}


def evaluate(cfg: RunConfig, model_path: Path, chunk: int = 16, per_prompt: list | None = None) -> dict:
    """{benchmark: {decoding: {metric: value}, "n_prompts": n}}: temperature 1 (``eval_samples`` per prompt)
    and greedy at the tiny scale, greedy only at the real scale.

    ``per_prompt``: a list that receives one row ``{"benchmark", "decoding", "prompt", "metric", "value"}`` per
    prompt and metric, the benchmark's scorer applied to that prompt's samples alone (NaN where a metric does not
    apply to the prompt), so that intervals can resample prompts (``mrtpo.analysis.stats.paired_difference``)."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM

    from mrtpo.models.sampling import sample
    from mrtpo.models.tokenizer import load_tokenizer

    require_benchmark_files(cfg)
    tokenizer = load_tokenizer(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    if torch.cuda.is_available():
        model = model.cuda()
    decodings = {"temp1": (cfg.temperature, cfg.eval_samples), "greedy": (0.0, 1)}
    if cfg.scale == "real":
        decodings = {"greedy": (0.0, 1)}
    results = {}
    for bench, (task, data, scorer) in benchmarks(cfg).items():
        rows = list(data)
        results[bench] = {"n_prompts": len(rows)}
        for decoding, (temperature, n) in decodings.items():
            texts = []
            for start in tqdm(range(0, len(rows), chunk), desc=f"eval {bench} {decoding}", leave=False):
                batch = rows[start : start + chunk]
                samples = sample(model, tokenizer, [r["prompt"] for r in batch], n=n, temperature=temperature,
                                 max_new_tokens=cfg.max_completion_length, seed=cfg.eval_seed + start)
                texts += [text for group in samples for _, text in group]
            results[bench][decoding] = scorer(task, [r for r in rows for _ in range(n)], texts)
            if per_prompt is not None:
                for i, row in enumerate(rows):
                    scores = scorer(task, [row] * n, texts[i * n : (i + 1) * n])
                    per_prompt += [{"benchmark": bench, "decoding": decoding, "prompt": i, "metric": metric,
                                    "value": value} for metric, value in scores.items()]
    return results


def eval_rows(cfg: RunConfig, name: str, results: dict) -> list[dict]:
    """Tidy rows: one per benchmark x decoding x metric, with the run's identifying columns."""
    rows = []
    for bench, res in results.items():
        for decoding, metrics in res.items():
            if not isinstance(metrics, dict):
                continue
            for metric, value in metrics.items():
                rows.append({"run": name, "task": cfg.task, "model": cfg.model, "method": cfg.label,
                             "mrtpo_beta": cfg.mrtpo_beta, "seed": cfg.seed, "steps": cfg.steps, "benchmark": bench,
                             "decoding": decoding, "metric": metric, "value": value, "n_prompts": res["n_prompts"]})
    return rows


def write_evaluation(cfg: RunConfig, model_dir: Path, name: str, out: Path, summary: dict, method: str | None = None) -> None:
    """Evaluate ``model_dir`` and write ``eval.json``, ``eval.csv`` (tidy rows named ``name``; their method column
    ``method`` when given, else the run's label), ``eval_prompts.csv`` and ``summary.json`` (``summary`` with the
    evaluation's time, ``eval_runtime_s``) into ``out``."""
    import pandas as pd

    per_prompt: list[dict] = []
    start = time.perf_counter()
    results = evaluate(cfg, model_dir, per_prompt=per_prompt)
    summary["eval_runtime_s"] = round(time.perf_counter() - start, 2)
    (out / "eval.json").write_text(json.dumps(results, indent=2))
    rows = pd.DataFrame(eval_rows(cfg, name, results))
    if method is not None:
        rows = rows.assign(method=method, steps=0)
    rows.to_csv(out / "eval.csv", index=False)
    pd.DataFrame(per_prompt).to_csv(out / "eval_prompts.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
