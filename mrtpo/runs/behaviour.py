"""Behaviour fingerprints: what the code does, as a hash, so that runs of different code are never compared.

A run's content hash (``mrtpo.runs.runner.identity``) covers its config, base, data and package versions, not what the
code does with them: a changed reward checker or tokenizer loader leaves the hash alone. The fingerprint of an arm
on a task is the hash of a short deterministic probe run by the current code:

* ``shared``: every reward function of every reward set on >= 200 fixed responses (the reference responses of 48
  held-out synthetic prompts, each of the task's warm-up corruptions of them, and edge cases: empty, whitespace
  only, cut in half, doubled), the default tiny base's tokenizer on the same texts, and the evaluation (sampled
  and greedy) of that base on 4 held-out prompts;
* ``method/<m>``: two RL steps of method ``m`` on the task's default tiny base at ``PROBE_RUN`` (one thread): the
  logged metrics (timings left out), rounded to 6 significant digits;
* ``modifier/<m>``: the same for each modifier (``+saw``, ``+opsd``, ``+constlen``) stacked on ``mrtpo``
  (``+opsd`` on ``gdpo``), and for the placement dial (``blend``: ``mrtpo`` at ``region_blend=0.5``).

``fingerprint(task, arm) = sha256(shared, method/<base>, modifier/<each modifier>)[:16]``: a change to the OPSD
term makes only OPSD-carrying arms stale. ``fingerprints.json`` pins every probe's digest for the current code
under ``RESULTS_VERSION``, and ``probe_values.json`` the values that digest names; ``tests/test_fingerprint.py``
reruns every probe and compares its values with the pinned ones (:func:`differences`): digests, counts, token ids
and rewards exactly, the training probes' metrics within :data:`TOLERANCE`. Not by digest: another CPU sums in
another order (AVX-512 against AVX2 kernels), which moves the metrics' last bits, and a number that close to a
rounding boundary flips its 6th digit, so 39 of the 42 training probes' digests differed on an AVX-512 machine
running the code they were pinned with. A change of behaviour fails the suite until ``mrtpo fingerprint --write``
records the new values and digests under a bumped version; a refactor that keeps results identical keeps every
fingerprint. Run folders record the fingerprint of the code that wrote them (``summary.json``); ``mrtpo runs
--stale`` lists the others.

Folders written before fingerprints existed were certified by :func:`first_step`: the current code replays the
run's first step (the batch sampled before any update, its rewards, advantages, loss and gradient norm) and every
value must equal the folder's logged step 1; a folder that matches records the current fingerprint with
``fingerprint_evidence`` saying so (``benchmarks/certify_runs.py``), one that does not is retrained.
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import lru_cache
from pathlib import Path

#: the version of the pinned digests: bumped whenever a change of behaviour is recorded (``mrtpo fingerprint --write``)
RESULTS_VERSION = 1
PINNED_FILE = Path(__file__).with_name("fingerprints.json")
#: each probe's values when its digest was pinned: ``{task: {probe name: values}}``
VALUES_FILE = Path(__file__).with_name("probe_values.json")
#: how far a probe's number may move and still be the same behaviour, ``|a - b| <= rel max(|a|, |b|) + atol``: with
#: scalar or AVX2 kernels instead of AVX-512 the 45 probes' numbers moved by at most 1.8e-5 relative (losses near 0
#: by 1.1e-8); a changed formula, reward or sample moves a loss, gradient norm or reward mean by far more
TOLERANCE = {"rel": 1e-4, "atol": 1e-6}
#: the arm each modifier's probe stacks it on
MODIFIER_BASE = {"saw": "mrtpo", "constlen": "mrtpo", "opsd": "gdpo", "blend": "mrtpo"}
#: settings that change what a method computes without a modifier of its own, each probed as a pseudo-modifier at
#: one value: the placement dial between MRTPO's relevance and the check region (``MRTPOConfig.region_blend``)
OPTIONS = {"blend": ("region_blend", 0.5)}
#: what ``record`` calls an untrained base's evaluation (``runs.base_evaluation``)
BASE_ARM = "base"

class StaleComparison(ValueError):
    """Runs of different code behaviour (fingerprints) asked to be compared, or a run of stale code."""


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _rounded(value):
    """Floats to 6 significant digits (the probe's numbers, robust to the last bits), recursively."""
    if isinstance(value, float):
        return value if not math.isfinite(value) else float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value



def probe_names() -> list[str]:
    """Every probe a task pins: ``shared``, one per method, one per modifier and per ``OPTIONS`` setting."""
    from mrtpo.method.advantages import METHODS
    from mrtpo.runs.config import MODIFIERS

    return (["shared"] + [f"method/{m}" for m in METHODS] + [f"modifier/{m}" for m in MODIFIERS]
            + [f"modifier/{m}" for m in OPTIONS])



@lru_cache(maxsize=1)
def pinned() -> dict:
    """``fingerprints.json``: ``{"results_version": n, "probes": {task: {probe name: digest}}}`` (no probes before
    the first ``mrtpo fingerprint --write``)."""
    if not PINNED_FILE.exists():
        return {"results_version": RESULTS_VERSION, "probes": {}}
    return json.loads(PINNED_FILE.read_text())


@lru_cache(maxsize=1)
def pinned_values() -> dict:
    """``probe_values.json``: ``{task: {probe name: values}}``, the values each pinned digest names (empty before the
    first ``mrtpo fingerprint --write``)."""
    return json.loads(VALUES_FILE.read_text()) if VALUES_FILE.exists() else {}


def differences(values, pinned_value, where: str = "") -> list[str]:
    """Where a probe's ``values`` differ from its pinned ones, recursively: numbers beyond :data:`TOLERANCE` (NaN
    equals NaN), anything else (digests, strings, booleans, keys, lengths) at all; empty when they agree."""
    if isinstance(values, dict) and isinstance(pinned_value, dict):
        if values.keys() != pinned_value.keys():
            return [f"{where or '/'}: keys {sorted(set(values) ^ set(pinned_value))} on one side only"]
        return [d for k in sorted(values) for d in differences(values[k], pinned_value[k], f"{where}/{k}")]
    if isinstance(values, list) and isinstance(pinned_value, list):
        if len(values) != len(pinned_value):
            return [f"{where}: {len(values)} entries, pinned {len(pinned_value)}"]
        return [d for i, pair in enumerate(zip(values, pinned_value)) for d in differences(*pair, f"{where}[{i}]")]
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (values, pinned_value))
    if numbers and (values == pinned_value or math.isnan(values) and math.isnan(pinned_value)
                    or abs(values - pinned_value) <= TOLERANCE["rel"] * max(abs(values), abs(pinned_value))
                    + TOLERANCE["atol"]):
        return []
    same = not numbers and type(values) is type(pinned_value) and values == pinned_value  # True is not 1 here
    return [] if same else [f"{where}: {values!r}, pinned {pinned_value!r}"]


def unpinned(values: dict) -> dict[tuple[str, str], list[str]]:
    """The probes of ``values`` (``{task: {probe name: values}}``) that are not pinned as they are: (task, probe)
    → their :func:`differences` from the pinned values, empty for a probe with no pinned values yet."""
    out = {}
    for task, probes in values.items():
        for name, value in probes.items():
            before = pinned_values().get(task, {}).get(name)
            found = [] if before is None else differences(value, before)
            if before is None or found:
                out[task, name] = found
    return out


def fingerprint(task_name: str, arm: str, probes: dict | None = None) -> str:
    """The behaviour fingerprint of ``arm`` (a method label: ``mrtpo``, ``gdpo+saw``; ``"base"`` for an untrained
    base's evaluation, ``runs.base_evaluation``: the shared probe alone) on a task, from the pinned probe digests
    (or ``probes``: ``{probe name: digest}`` of one task)."""
    probes = probes if probes is not None else pinned()["probes"][task_name]
    if arm == BASE_ARM:
        return _digest([probes["shared"]])[:16]
    base, *mods = arm.split("+")
    parts = [probes["shared"], probes[f"method/{base}"]] + [probes[f"modifier/{m}"] for m in sorted(mods)]
    return _digest(parts)[:16]


def record(task_name: str, arm: str) -> dict:
    """What a run folder's ``summary.json`` records of the code that trained it (no fingerprint while the arm's
    probes are being pinned for the first time: a new task, or a new method's probe)."""
    return {"fingerprint": current(task_name, arm), "results_version": pinned()["results_version"], "behaviour_of": arm}


def current(task_name: str, arm: str) -> str | None:
    """The current code's fingerprint of ``arm`` on a task; None where a probe it needs is not pinned: a task of the
    user's own (pin it: ``mrtpo fingerprint --write --task <name>``), or a new method while it is being pinned."""
    try:
        return fingerprint(task_name, arm, pinned()["probes"].get(task_name, {}))
    except KeyError:
        return None


def write_pinned(values: dict) -> None:
    """Pin probe ``values`` (``{task: {probe name: values}}``, :func:`mrtpo.runs.probes.run_probe`) into both files
    under ``RESULTS_VERSION``, beside the probes already pinned. A probe whose values agree with its pinned ones
    (:func:`differences`: the same behaviour, on this CPU or another) keeps its digest and values; a new probe (of a
    new method) is only added; a probe whose values changed gets the digest of its new values, which is refused
    under the old version, so that every change of behaviour gets a version of its own."""
    old = pinned() if PINNED_FILE.exists() else {"results_version": RESULTS_VERSION, "probes": {}}
    digests = {t: dict(p) for t, p in old["probes"].items()}
    kept = {t: dict(p) for t, p in pinned_values().items()}
    new = unpinned(values)
    changed = [f"{task} {name}" for task, name in new if name in old["probes"].get(task, {})]
    for task, name in new:
        digests.setdefault(task, {})[name] = _digest(values[task][name])
        kept.setdefault(task, {})[name] = values[task][name]
    if changed and old["results_version"] == RESULTS_VERSION:
        raise StaleComparison(f"the code's behaviour changed ({', '.join(changed)}: probe values differ from "
                              f"probe_values.json) but RESULTS_VERSION is still {RESULTS_VERSION}: bump it in "
                              "mrtpo/runs/behaviour.py, then write again; every run folder of an affected arm becomes "
                              "stale (mrtpo runs --stale)")
    PINNED_FILE.write_text(json.dumps({"results_version": RESULTS_VERSION, "probes": digests}, indent=1,
                                      sort_keys=True) + "\n")
    VALUES_FILE.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    pinned.cache_clear()
    pinned_values.cache_clear()


# ----------------------------------------------------------------------------------------------------
# run folders


def folder_arm(config: dict) -> str:
    """The arm whose fingerprint a run of ``config`` (a ``RunConfig`` as a dict) carries: its method with modifiers,
    and ``+<option>`` for each ``OPTIONS`` setting away from its default (``mrtpo+blend``)."""
    from mrtpo.runs.config import method_label

    return method_label(config) + "".join(f"+{name}" for name, (field, _) in OPTIONS.items() if config.get(field))


def is_stale(folder: Path) -> bool:
    """Whether a run (or base evaluation) folder was written by code of another behaviour than the current, or
    records none."""
    config = json.loads((folder / "config.json").read_text())["config"]
    summary = json.loads((folder / "summary.json").read_text())
    arm = summary.get("behaviour_of") or folder_arm(config)
    return summary.get("fingerprint") != current(config["task"], arm)


def check_current(runs) -> None:
    """Raise ``StaleComparison`` naming every run of ``runs`` (``mrtpo.runs.results.Run``) whose folder records another
    fingerprint than the current code gives its arm (or none): compared runs are then all of one code behaviour.
    (Different arms carry different fingerprints by design: each covers the code its arm runs.)"""
    stale = [run for run in runs if is_stale(run.path)]
    if stale:
        names = ", ".join(f"{run.path.name} ({run.fingerprint or 'none recorded'})" for run in stale)
        raise StaleComparison(f"runs written by code of another behaviour cannot be compared: {names}. Retrain them "
                              "(mrtpo runs --stale lists them; mrtpo train ... --force).")



def book_table(folders) -> "pd.DataFrame":
    """Per task and arm of the given run folders: the fingerprint the current code gives it, the folders and how
    many of them record it (the reproduce page: the behaviour the book was built with)."""
    import pandas as pd

    rows = {}
    for folder in folders:
        config = json.loads((folder / "config.json").read_text())["config"]
        key = (config["task"], folder_arm(config))
        row = rows.setdefault(key, {"task": key[0], "arm": key[1], "fingerprint": fingerprint(*key), "folders": 0,
                                    "current": 0})
        row["folders"] += 1
        row["current"] += not is_stale(folder)
    return pd.DataFrame(list(rows.values()), columns=["task", "arm", "fingerprint", "folders", "current"])
