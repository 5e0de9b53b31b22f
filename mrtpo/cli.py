"""The ``mrtpo`` command: train, evaluate, list runs, plan a paper-scale run. See ``mrtpo --help``.

Every command is a thin wrapper over ``mrtpo.runs.runner`` (the same calls a notebook makes).
"""

from __future__ import annotations

import argparse
import json
import sys

EXAMPLES = """\
examples:
  mrtpo train --task sql --method mrtpo --model tiny          # ~10 min on 2 CPU cores; the folder is reused
  mrtpo train --task tool --method gdpo --seed 1 --steps 50
  mrtpo train --task sql --method mrtpo+saw --mrtpo-beta 0.25 # SAW stacked, reallocation strength 0.25
  mrtpo train --task sql --method gdpo+saw                    # SAW alone
  mrtpo train --task sql --method opsd                        # on-policy self-distillation (teacher sees every Z)
  mrtpo train --task sql --method opsd --set opsd_teacher=current opsd_divergence=reverse opsd_clip=0.05
  mrtpo train --task sql --method gdpo+opsd --set opsd_coef=0.1   # distillation term added to GDPO's loss
  mrtpo train --task sql --method mrtpo+constlen              # fixed-length control (constant loss normaliser)
  mrtpo train --task sql --method mrtpo --rewards sub         # execution reward split into 4 sub-verifiers (K=6)
  mrtpo train --task sql --method mrtpo --dial 0.2            # from the testbed's dial base at setting 0.2
  mrtpo train --task sql --method mrtpo --z-blocks my_module:my_z_blocks   # your own Z_k (source in the key)
  mrtpo eval --task sql --method mrtpo                        # evaluation of that run (trains nothing)
  mrtpo eval --task sql --base                                # the untrained base policy
  mrtpo runs --task sql                                       # table of finished run folders
  mrtpo plan --task sql --model 7b --gpus 8                   # paper-scale plan, no weights loaded
  mrtpo diagnose --task sql --model tiny --samples 256        # will MRTPO help? measured before training
  mrtpo bases                                                 # the tiny bases the repository carries (bases/)
  mrtpo bases --reproduce                                     # rebuild each and compare its weights (hours)

Run folders: results/runs/<task>/<model>/<method>[-dial<d>][-beta<b>][-steps<n>]-seed<s>-<hash8>/ ($MRTPO_RESULTS overrides
results/). Checkpoints and final weights: ~/.cache/mrtpo/work/<hash>/ ($MRTPO_CACHE). A run killed midway
resumes from its last checkpoint when the same command is run again.
"""


def _value(text: str):
    """A --set value: JSON when it parses (numbers, true/false, lists), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _run_args(p: argparse.ArgumentParser, method_required: bool = True) -> None:
    from mrtpo.method.advantages import METHODS
    from mrtpo.runs.config import MODIFIERS
    from mrtpo.models.registry import model_names
    from .tasks import TASKS
    from mrtpo.models.recipe import DIAL_SETTINGS

    p.add_argument("--task", required=True, help=f"one of: {', '.join(TASKS)}")
    p.add_argument("--method", required=method_required, default="gdpo",
                   help=f"one of: {', '.join(METHODS)}; each but opsd may carry modifiers: "
                   + "; ".join(f"+{m}: {text}" for m, text in MODIFIERS.items())
                   + " (e.g. mrtpo+saw, gdpo+opsd, mrtpo+constlen)")
    p.add_argument("--model", default="tiny",
                   help=f"one of: {', '.join(model_names())}, or a local folder of weights (default tiny: the "
                   "embedded CPU policy; smoke: seconds-to-build, for tests)")
    p.add_argument("--seed", type=int, default=0, help="RL seed (default 0)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the registry's, 100 for tiny)")
    p.add_argument("--mrtpo-beta", type=float, default=None,
                   help="MRTPO reallocation strength in [0, 1] (default 0.5; TRL's KL coefficient is kl_beta)")
    p.add_argument("--rewards", default=None,
                   help="the task's reward set: default, or (sql) sub: the execution reward replaced by its four check "
                   "actions (tables, columns, WHERE, joins), each with its own Z block")
    p.add_argument("--dial", type=float, default=None, metavar="SETTING",
                   help=f"start from the testbed's dial base at this gated-noise rate in [0, 1] (measured settings "
                   f"{', '.join(map(str, DIAL_SETTINGS))}; tiny sizes only) instead of the task's default base")
    p.add_argument("--z-blocks", default=None, metavar="MODULE:FUNCTION",
                   help="train with your own Z blocks: a function with a reward function's signature returning "
                   "{reward name: text} per response; its source is part of the run's key")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="any other run setting or MRTPOConfig field, e.g. --set prompts_per_step=4 save_steps=5")


def _overrides(args) -> dict:
    out = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        out[key] = _value(value)
    if args.mrtpo_beta is not None:
        out["mrtpo_beta"] = args.mrtpo_beta
    if args.rewards is not None:
        out["rewards"] = args.rewards
    if args.dial is not None:
        out["dial"] = args.dial
    if args.z_blocks is not None:
        out["z_blocks"] = _import_function(args.z_blocks)
    return out


def _import_function(path: str):
    """``module:function`` -> the function (the module importable from the current directory or sys.path)."""
    import importlib

    from mrtpo.runs.config import BadRequest

    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise BadRequest(f"--z-blocks expects MODULE:FUNCTION, got {path!r}")
    sys.path.insert(0, "")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise BadRequest(f"--z-blocks {path}: {exc}") from None


def cmd_train(args) -> None:
    from mrtpo.runs.runner import run

    from mrtpo.models.geometry import job_rank

    overrides = _overrides(args)
    r = run(args.task, args.method, args.model, args.seed, args.steps, force=args.force, **overrides)
    if job_rank() == 0:  # on several processes, process 0 evaluates and writes the folder
        print(("trained: " if r.trained else "reused: ") + str(r.path))
        print(*r.eval_lines(), sep="\n")


def cmd_eval(args) -> None:
    from mrtpo.runs.runner import base_evaluation, find

    if args.base:
        overrides = _overrides(args)
        overrides.pop("mrtpo_beta", None)
        r = base_evaluation(args.task, args.model, **overrides)
        print(r.path)
        print(*r.eval_lines(), sep="\n")
        return
    r = find(args.task, args.method, args.model, args.seed, args.steps, **_overrides(args))
    if r is None:
        raise SystemExit("no finished run with these arguments; train it first with `mrtpo train` and the same arguments")
    print(r.path)
    print(*r.eval_lines(), sep="\n")


def cmd_runs(args) -> None:
    import pandas as pd

    from mrtpo.runs.behaviour import is_stale
    from mrtpo.runs.results import run_folders, runs_table

    if args.stale:  # one folder a line, nothing when every folder is the current code's
        for folder in run_folders(args.task):
            if is_stale(folder):
                print(folder)
        return
    table = runs_table(args.task)
    if table.empty:
        print("no finished runs (train one with `mrtpo train --task sql --method mrtpo`)")
        return
    with pd.option_context("display.max_colwidth", 120, "display.width", 200):
        print(table.to_string(index=False))


def cmd_fingerprint(args) -> None:
    from tqdm.auto import tqdm

    from mrtpo.method.advantages import METHODS
    from mrtpo.runs.config import MODIFIERS
    from mrtpo.runs.behaviour import OPTIONS, fingerprint, pinned, probe_names, unpinned, write_pinned
    from mrtpo.runs.probes import run_probe
    from .tasks import TASKS, get_task

    tasks = [args.task] if args.task else list(TASKS)
    if args.check or args.write:
        values = {}
        for t, name in tqdm([(t, n) for t in tasks for n in probe_names()], desc="probes", unit="probe"):
            values.setdefault(t, {})[name] = run_probe(get_task(t), name)
        changed = [f"{t} {name} ({found[0] if found else 'not pinned'})" for (t, name), found in unpinned(values).items()]
        print("probes that differ from the pinned values: " + (", ".join(changed) or "none"))
        if args.write:
            write_pinned(values)
        elif changed:
            sys.exit(1)
    print(f"results version {pinned()['results_version']}")
    arms = list(METHODS) + [f"mrtpo+{m}" for m in list(MODIFIERS) + list(OPTIONS)]
    for t in tasks:
        print(t + ": " + ", ".join(f"{a} {fingerprint(t, a)}" for a in arms))


def cmd_plan(args) -> None:
    from mrtpo.runs.config import BadRequest
    from mrtpo.runs.plan import dry_run
    from .tasks import get_task

    try:
        dry_run(get_task(args.task), args.model, args.method, gpus=args.gpus, gpu_memory_gib=args.gpu_memory, prompt_len=args.prompt_len)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def cmd_diagnose(args) -> None:
    import math
    from pathlib import Path

    from mrtpo.analysis.diagnose import diagnose, write_json
    from mrtpo.files.paths import results_root

    try:
        d = diagnose(args.task, args.model, samples=args.samples, beta=args.beta, seed=args.seed, dial=args.dial)
    except ValueError as exc:  # unknown task or model, bad beta: one line
        raise SystemExit(f"mrtpo: error: {exc}") from None
    dial = f"-dial{d['dial']:g}" if "dial" in d else ""
    out = Path(args.out) if args.out else results_root() / "diagnose" / f"{d['task']}-{d['model']}{dial}.json"
    write_json(d, out)
    fmt = lambda v: "n/a" if isinstance(v, float) and math.isnan(v) else f"{v:.3f}"  # noqa: E731
    cols = ("replay_rate", "concentration80", "concentration_x", "check_region_ratio", "entropy_corr")
    print(f"{'reward':22s} " + " ".join(f"{c:>18s}" for c in cols))
    for name, r in {**d["rewards"], "all rewards": d["overall"]}.items():
        print(f"{name:22s} " + " ".join(f"{fmt(r[c]):>18s}" for c in cols))
    o = d["overall"]
    print(f"effective K {fmt(o['effective_k'])}; realised s at beta {d['beta']:g}: {fmt(o['s_mean'])} (per step-sized "
          f"batch: {', '.join(fmt(x) for x in o['s'])}); cross-reward correlation {fmt(o['cross_reward_corr'])}")
    print("verdict: " + d["verdict"])
    print(f"{d['samples']} samples in {d['seconds']['total']:.0f} s; written to {out}")


def cmd_bases(args) -> None:
    import tempfile
    from pathlib import Path

    from mrtpo.files.paths import SHIPPED_BASES, cache_root
    from .tasks import get_task
    from mrtpo.models.tiny import reproduce, ship, shipped_base, shipped_names

    if args.ship:
        for name in args.ship:
            built = cache_root() / "models" / name
            if not (built / "mrtpo_recipe.json").exists():
                raise SystemExit(f"mrtpo: error: no built base {name} in {built.parent} (build it first, e.g. by a run)")
            print(f"shipped {ship(built)}")
        return
    names = args.names or shipped_names()
    if args.reproduce:
        rows = []
        with tempfile.TemporaryDirectory() as work:
            for name in names:
                try:
                    r = reproduce(name, Path(work), get_task(name.split("-")[0]))  # <task>-<size>-<seed>-<hash>
                except ValueError as exc:
                    raise SystemExit(f"mrtpo: error: {exc}") from None
                rows.append(r)
                print(f"{r['base']:28s} {'identical' if r['same'] else 'DIFFERENT'} weights; max |difference| "
                      f"{r['max_abs_diff']:.3g}; rebuilt in {r['build_seconds']:.0f} s", flush=True)
        if not all(r["same"] for r in rows):
            sys.exit(1)
        return
    print(f"{len(names)} bases in {SHIPPED_BASES} (installed into the cache instead of built):")
    for name in names:
        path = shipped_base(name)
        if path is None:
            raise SystemExit(f"mrtpo: error: no shipped base {name!r} (the shipped ones: {', '.join(shipped_names())})")
        meta = json.loads((path / "mrtpo_recipe.json").read_text())
        size = sum(f.stat().st_size for f in path.iterdir()) / 2**20
        stage = f"stage 2 of {meta['parent_base']}" if "parent_base" in meta else "from scratch"
        print(f"  {name:28s} {size:5.1f} MiB  {stage}; built in {meta['build_seconds']:.0f} s")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrtpo", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES,
        description="MRTPO reproduction: multi-reward RL where each reward's advantage goes to the tokens it is "
        "about. Train and evaluate on the embedded tiny policies (CPU) or the paper's models (GPU).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train, evaluate and write a run folder (reused when it exists)",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    _run_args(p)
    p.add_argument("--force", action="store_true", help="retrain from scratch and replace the run folder")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", help="print the evaluation of a finished run, or of the base policy (--base)")
    _run_args(p, method_required=False)
    p.add_argument("--base", action="store_true", help="the untrained base policy's evaluation instead (evaluated once, kept under results/base/)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("runs", help="table of finished run folders")
    p.add_argument("--task", default=None, help="only this task")
    p.add_argument("--stale", action="store_true", help="only the folders written by code of another behaviour than "
                   "the current (mrtpo.runs.behaviour), one path a line; prints nothing when every folder is current")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("fingerprint", help="the behaviour fingerprints of the current code (pinned in "
                       "mrtpo/runs/fingerprints.json); --check recomputes them (minutes), --write pins new ones")
    p.add_argument("--task", default=None, help="only this task")
    p.add_argument("--check", action="store_true", help="recompute every probe and compare with the pinned digests")
    p.add_argument("--write", action="store_true", help="recompute every probe and pin it (refused unless "
                   "RESULTS_VERSION was bumped for a change of behaviour)")
    p.set_defaults(func=cmd_fingerprint)

    p = sub.add_parser("plan", help="print the run plan (model, data, steps, batch, GPU memory) without loading weights")
    p.add_argument("--task", required=True)
    p.add_argument("--model", default="7b")
    p.add_argument("--method", default="mrtpo")
    p.add_argument("--gpus", type=int, default=1, help="GPUs (processes); more than one plans DeepSpeed ZeRO-3")
    p.add_argument("--gpu-memory", type=float, default=80.0, help="memory per GPU in GiB (default 80: H100/A100)")
    p.add_argument("--prompt-len", type=int, default=512, help="assumed prompt length in tokens (default 512)")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("diagnose", help="measure concentration, check-region ratio, realised s, replay rate and "
                       "reward-specificity of a policy before training, with the reader's verdict (JSON too)")
    p.add_argument("--task", required=True)
    p.add_argument("--model", default="tiny", help="registry name or a local policy folder (default tiny)")
    p.add_argument("--samples", type=int, default=256, help="responses to sample, in groups of G (default 256)")
    p.add_argument("--beta", type=float, default=None, help="MRTPO beta for the realised s (default: the registry's)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--dial", type=float, default=None, metavar="SETTING",
                   help="diagnose the testbed's dial base at this gated-noise rate instead of the default base (tiny sizes)")
    p.add_argument("--out", default=None, help="JSON path (default results/diagnose/<task>-<model>[-dial<d>].json)")
    p.set_defaults(func=cmd_diagnose)

    p = sub.add_parser("bases", help="list the tiny bases the repository carries; --reproduce rebuilds and compares them")
    p.add_argument("names", nargs="*", help="base folder names (default: every shipped base)")
    p.add_argument("--reproduce", action="store_true",
                   help="rebuild each from its recorded recipe and compare the weights (exit 1 when any differs)")
    p.add_argument("--ship", nargs="+", metavar="NAME", help="copy these built bases from the cache into bases/")
    p.set_defaults(func=cmd_bases)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    from mrtpo.runs.config import BadRequest
    from mrtpo.runs.behaviour import StaleComparison
    from mrtpo.files.manifest import ResultsNotWritable, RunFolderAltered
    from mrtpo.files.paths import DataNotAvailable
    from mrtpo.models.spec import ModelNotAvailable
    from mrtpo.models.geometry import DoesNotFit

    try:
        args.func(args)
    except (BadRequest, DataNotAvailable, DoesNotFit, ModelNotAvailable, ResultsNotWritable, RunFolderAltered,
            StaleComparison) as exc:  # one clear message, no stack trace
        sys.exit(f"mrtpo: error: {exc}")


if __name__ == "__main__":
    main()
