"""Certify committed run folders written before behaviour fingerprints existed (``mrtpo.runs.behaviour``): replay
each folder's first step with the current code (``fingerprint.first_step``, one thread) and compare every logged
value with the folder's step 1 (``fingerprint.step_differences``). One JSON line per folder is appended to the
output file (restartable: folders already there are skipped); ``--stamp`` then records the current fingerprint in
every folder that matched (``summary.json``: ``fingerprint``, ``results_version``, ``fingerprint_evidence``) and
rewrites its manifest. The untrained bases' evaluations (``results/base``) are evaluated again and every number
compared. Folders that differ are listed by ``mrtpo runs --stale`` and retrained
(``benchmarks/retrain_stale.py``).

    python benchmarks/certify_runs.py OUT.jsonl [--task sql] [--stamp]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mrtpo.runs.probes import first_step, resolve_folder_config, step_differences


def flat(tree: dict, prefix: str = "") -> dict:
    """A nested evaluation as {"benchmark/decoding/metric": value}."""
    out = {}
    for k, v in tree.items():
        out.update(flat(v, f"{prefix}{k}/") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def main() -> None:
    import pandas as pd
    import torch

    from mrtpo.runs import behaviour as F
    from mrtpo.runs.evaluation import evaluate
    from mrtpo.runs import base_path
    from mrtpo.files.manifest import write_manifest
    from mrtpo.runs.results import run_folders
    from mrtpo.files.paths import results_root

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--task")
    ap.add_argument("--stamp", action="store_true", help="record the fingerprint in every folder that matched")
    args = ap.parse_args()
    out = Path(args.out)
    seen = {json.loads(line)["folder"]: json.loads(line) for line in out.open()} if out.exists() else {}
    if args.stamp:
        for rel, row in seen.items():
            folder = results_root() / rel
            summary = json.loads((folder / "summary.json").read_text())
            if not row["match"] or summary.get("fingerprint"):
                continue
            config = json.loads((folder / "config.json").read_text())["config"]
            evidence = ("evaluated again by the current code on {date}: every number of eval.json equal ({n})"
                        if row.get("base") else
                        "step 1 replayed by the current code on {date}: every logged value equal ({n} columns)")
            summary.update(F.record(config["task"], F.BASE_ARM if row.get("base") else F.folder_arm(config)),
                           fingerprint_evidence=evidence.format(date=row["date"], n=row["compared"]))
            (folder / "summary.json").write_text(json.dumps(summary, indent=2))
            write_manifest(folder)
            print("stamped", rel)
        return
    torch.set_num_threads(1)
    bases = sorted(p.parent for p in (results_root() / "base").glob(f"{args.task or '*'}/*/*/eval.json"))
    for folder in run_folders(args.task) + bases:
        rel = folder.relative_to(results_root()).as_posix()
        if rel in seen or json.loads((folder / "summary.json").read_text()).get("fingerprint"):
            continue
        config = json.loads((folder / "config.json").read_text())["config"]
        if config.get("z_blocks"):  # a custom Z-block function lives in its notebook: the playground reruns it
            print("skip (custom Z blocks) " + rel, flush=True)
            continue
        start = time.time()
        if folder in bases:  # an untrained base's evaluation: evaluated again, every number compared
            again = evaluate(resolve_folder_config(config), base_path(resolve_folder_config(config)))
            logged, replayed = flat(json.loads((folder / "eval.json").read_text())), flat(again)
            diffs = {k: (logged.get(k), replayed.get(k)) for k in set(logged) | set(replayed)
                     if logged.get(k) != replayed.get(k)}
        else:
            replayed = first_step(config)
            logged = pd.read_csv(folder / "metrics.csv").iloc[0].to_dict()
            diffs = step_differences(logged, replayed)
        row = {"folder": rel, "match": not diffs, "diffs": {k: list(v) for k, v in diffs.items()},
               "compared": len(set(logged) & set(replayed)), "seconds": round(time.time() - start, 1),
               "date": time.strftime("%Y-%m-%d"), "base": folder in bases}
        with out.open("a") as fh:
            fh.write(json.dumps(row, default=str) + "\n")
        print(("match " if row["match"] else "DIFFER ") + rel, row["seconds"], "s", flush=True)


if __name__ == "__main__":
    main()
