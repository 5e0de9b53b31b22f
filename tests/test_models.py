"""Model registry, tiny bases (smoke size) and diagnostics."""

from __future__ import annotations

import hashlib
import json
import math
import time

import pytest
import torch

from mrtpo.analysis import diagnostics as D
from mrtpo.models.spec import ModelNotAvailable
from mrtpo.runs.plan import dry_run
from mrtpo.models import model_spec, resolve_model
from mrtpo.tasks.warmup import IF_VIOLATIONS, apply_noise, violate_constraint
from mrtpo.models.tiny import tiny_base
from mrtpo.tasks import get_task
from mrtpo.models import recipe as recipes
from mrtpo.method.regions import in_region, token_char_spans
from mrtpo.models.sampling import sample


@pytest.fixture(scope="module")
def smoke_builds(tmp_path_factory):
    """The same smoke base built twice, in two separate caches."""
    paths = []
    for name in ("a", "b"):
        root = tmp_path_factory.mktemp(name)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MRTPO_CACHE", str(root))
            paths.append(tiny_base(get_task("sql"), size="smoke", seed=0))
    return paths


def weights_hash(path) -> str:
    from safetensors.torch import load_file

    tensors = load_file(str(path / "model.safetensors"))
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].numpy().tobytes())
    return h.hexdigest()


def load_tok(path):
    from mrtpo.models.tokenizer import load_tokenizer

    return load_tokenizer(path)


def test_a_saved_base_tokenizes_as_its_warm_up_did(smoke_builds):
    """The loaded tokenizer splits text exactly as the saved tokenizer.json (the warm-up's own) does: identifiers stay
    whole (AutoTokenizer loads it as a Qwen2Tokenizer, whose pre-tokenizer splits "person_id" into "person" "_id")."""
    from tokenizers import Tokenizer

    saved = Tokenizer.from_file(str(smoke_builds[0] / "tokenizer.json"))
    loaded = load_tok(smoke_builds[0])
    text = "SELECT orders.person_id FROM play_song WHERE people.name = 'Cid'"
    assert loaded(text, add_special_tokens=False).input_ids == saved.encode(text, add_special_tokens=False).ids
    assert loaded.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True)


def test_smoke_build_is_fast_cached_and_records_the_mix(smoke_builds):
    meta = json.loads((smoke_builds[0] / "mrtpo_recipe.json").read_text())
    assert meta["build_seconds"] < 30
    assert set(meta["warmup_mix"]) >= {"examples", "noise_applied", "blocks_shown", "note"}
    assert meta["recipe"]["noise"], "the noise mix must be recorded with the model"
    assert smoke_builds[0].name.startswith("sql-smoke-0-")


def test_same_seed_same_tokenizer_and_weights(smoke_builds):
    a, b = smoke_builds
    assert load_tok(a).get_vocab() == load_tok(b).get_vocab()
    assert weights_hash(a) == weights_hash(b)


def test_stage_two_builds_its_parent_once_and_continues_it(tmp_path, monkeypatch):
    """A recipe with a parent: the parent's base is built first (or reused), the child starts from its weights
    and tokenizer, and the child's recipe file names both."""
    import dataclasses

    from safetensors.torch import load_file

    from mrtpo.models import tiny
    from mrtpo.tasks import get_task

    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path))
    built = []
    real_build = tiny.build
    monkeypatch.setattr(tiny, "build", lambda task, recipe, *a, **k: built.append(recipe) or real_build(task, recipe, *a, **k))
    parent = dataclasses.replace(recipes.default_recipe(get_task("sql"), "smoke"), steps=2, batch=4, n_train=12)
    child = dataclasses.replace(parent, steps=1, lr=1e-3, loo_blocks=True, robust_p=0.5, copy_weight=4.0, parent=parent)
    path = tiny_base(get_task("sql"), seed=0, recipe=child)
    assert built == [parent, child]
    parent_path = tiny.tiny_path(get_task("sql"), seed=0, recipe=parent)
    meta = json.loads((path / "mrtpo_recipe.json").read_text())
    assert meta["parent_base"] == parent_path.name and recipes.Recipe.from_dict(meta["recipe"]) == child
    assert load_tok(path).get_vocab() == load_tok(parent_path).get_vocab()
    w_parent, w_child = load_file(str(parent_path / "model.safetensors")), load_file(str(path / "model.safetensors"))
    assert w_parent.keys() == w_child.keys() and not all(torch.equal(w_parent[k], w_child[k]) for k in w_parent)
    # a second child of the same parent reuses it; a built child is reused as it is
    other = tiny_base(get_task("sql"), seed=0, recipe=dataclasses.replace(child, robust_p=0.0))
    assert tiny_base(get_task("sql"), seed=0, recipe=child) == path and other != path
    assert built == [parent, child, dataclasses.replace(child, robust_p=0.0)]


def test_processes_asking_for_a_missing_base_at_once_build_it_once(tmp_path, monkeypatch):
    """Several processes of one job resolving the same missing base: one builds it, the others wait and reuse it
    (the lock is the models layer's; the runner no longer builds bases ahead of training). Threads stand for the
    processes: each takes the file lock through its own open file."""
    import threading

    from mrtpo.models import tiny
    from mrtpo.tasks import get_task

    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path))
    monkeypatch.setattr(tiny, "shipped_base", lambda name: None)
    built = []

    def slow_build(task, recipe, seed, out, parent=None):
        built.append(recipe)
        time.sleep(0.5)  # long enough for the other caller to find the base missing
        out.mkdir(parents=True)
        (out / "mrtpo_recipe.json").write_text("{}")

    monkeypatch.setattr(tiny, "build", slow_build)
    paths = []
    callers = [threading.Thread(target=lambda: paths.append(tiny_base(get_task("sql"), "smoke"))) for _ in range(2)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    assert len(built) == 1 and len(paths) == 2 and paths[0] == paths[1] and (paths[0] / "mrtpo_recipe.json").exists()


def test_tags_survive_skip_special_tokens(smoke_builds):
    tok = load_tok(smoke_builds[0])
    text = "<think>Use table people and value Rome.</think><answer>SELECT name FROM people WHERE city = 'Rome'</answer>"
    ids = tok(text, add_special_tokens=False).input_ids + [tok.eos_token_id]
    assert tok.decode(ids, skip_special_tokens=True) == text
    for tag in ("<think>", "</think>", "<answer>", "</answer>", "<tool_call>", "</tool_call>"):
        assert len(tok(tag, add_special_tokens=False).input_ids) == 1


def test_value_is_one_token_in_question_and_sql(smoke_builds):
    tok = load_tok(smoke_builds[0])
    (rome,) = tok("Rome", add_special_tokens=False).input_ids
    question = tok("How many people live in Rome?", add_special_tokens=False).input_ids
    sql = tok("SELECT name FROM people WHERE city = 'Rome'", add_special_tokens=False).input_ids
    assert rome in question and rome in sql
    digits = tok("age > 42", add_special_tokens=False).input_ids
    assert tok.convert_ids_to_tokens(digits)[-2:] == ["4", "2"]


def test_chat_template_ends_with_assistant_marker(smoke_builds):
    tok = load_tok(smoke_builds[0])
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|user|>\nhi\n<|assistant|>\n"


def test_7b_offline_gives_the_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_MODEL_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailable) as err:
        resolve_model(get_task("sql"), "7b")
    msg = str(err.value)
    assert "Qwen/Qwen2.5-Coder-7B-Instruct" in msg and str(tmp_path / "models") in msg and "MRTPO_MODEL_DIR" in msg
    assert isinstance(err.value, RuntimeError)


def test_model_dir_override(tmp_path, monkeypatch, smoke_builds):
    target = tmp_path / "Qwen" / "Qwen2.5-Coder-7B-Instruct"
    target.parent.mkdir(parents=True)
    target.symlink_to(smoke_builds[0], target_is_directory=True)
    monkeypatch.setenv("MRTPO_MODEL_DIR", str(tmp_path))
    assert resolve_model(get_task("sql"), "7b") == target
    assert resolve_model(get_task("sql"), str(smoke_builds[0])) == smoke_builds[0]


def test_dry_run_prints_the_plan(capsys):
    plan = dry_run(get_task("sql"), "7b")
    out = capsys.readouterr().out
    assert "Qwen/Qwen2.5-Coder-7B-Instruct" in out and "memory_gib_per_device" in out
    assert plan["steps"] == 100 and plan["prompts_per_step"] == 32 and len(plan["seeds"]) == 3
    assert plan["geometry"]["fits"] is False  # a 7B's training states alone exceed one 80 GB GPU
    eight = dry_run(get_task("sql"), "7b", gpus=8, print_plan=False)["geometry"]
    assert eight["fits"] and eight["memory_gib_per_device"] < 72 and eight["completions_per_step"] == 32 * 8
    assert model_spec(get_task("if"), "4b").kl_beta == 0 and model_spec(get_task("if"), "4b").steps == 300


def test_a_model_name_is_looked_up_once_into_its_kind(tmp_path, monkeypatch):
    """``get_model`` maps every registry name to the class of its kind; the run config holds that object and hands it
    down (the runner resolves the base through it, without looking the name up again)."""
    from mrtpo.models import get_model
    from mrtpo.models.registry import LocalFolder, PaperCheckpoint, Rehearsal, SmolLM2, TinyBase
    from mrtpo.runs import runner as runs

    kinds = {"tiny": TinyBase, "smoke": TinyBase, "rehearsal": Rehearsal, "smollm2": SmolLM2, "7b": PaperCheckpoint,
             str(tmp_path): LocalFolder}
    assert {name: type(get_model(name)) for name in kinds} == kinds
    assert [get_model(n).scale for n in ("smoke", "rehearsal", "smollm2", "7b")] == ["tiny", "real", "real", "real"]
    assert get_model(str(tmp_path)).label == tmp_path.name
    with pytest.raises(ValueError, match="valid names: tiny"):
        get_model("7B")
    with pytest.raises(ValueError, match="tiny recipe of size 'smoke'"):
        get_model("rehearsal").resolve(get_task("sql"), recipe=recipes.default_recipe(get_task("sql"), "smoke"))
    cfg = runs.resolve("sql", "gdpo", model="smoke")
    asked = []
    monkeypatch.setattr(TinyBase, "_made", lambda self, task, seed, recipe: asked.append((self, task, recipe)) or tmp_path)
    assert runs.base_path(cfg) == tmp_path
    assert asked == [(cfg.model_def, cfg.task_def, cfg.base_recipe)] and asked[0][0] is cfg.model_def


def test_unknown_pair_is_a_value_error():
    with pytest.raises(ValueError, match="not a paper setting"):
        dry_run(get_task("if"), "1.5b")


def test_noise_kinds_corrupt_only_their_region():
    import random

    resp = "<think>Use table people and value Rome.</think><answer>SELECT name FROM people WHERE age > 42</answer>"
    rng = random.Random(0)
    head = resp[: resp.index("</think>")]
    for kind in ("structure", "syntax"):
        noisy = apply_noise(resp, kind, rng, ["Kalo"])
        assert noisy != resp and noisy.startswith(head)
    assert apply_noise(resp, "tag", rng, ["Kalo"]).count("<") < resp.count("<") or "<" in resp


def test_each_if_violation_fails_its_checker_and_stays_in_its_region():
    """The IF warm-up noise: violating constraint k makes checker k fail, edits only the answer, and the
    edit touches (or removes) the region checker k reads."""
    import random

    from mrtpo.tasks import get_task
    from mrtpo.tasks.instruct.checkers import check_constraint, kwargs_list
    from mrtpo.tasks.instruct.regions import constraint_region

    task, rng, seen = get_task("if"), random.Random(0), set()
    for row in task.synthetic(150, seed=3):
        ref = task.reference_response(row)
        for iid, kw in zip(row["instruction_id_list"], kwargs_list(row["kwargs"])):
            assert check_constraint(ref, iid, kw, row["prompt_text"])
            bad = violate_constraint(ref, iid, rng)
            assert not check_constraint(bad, iid, kw, row["prompt_text"]), (iid, bad)
            head = ref[: ref.index("</think>")]
            assert bad.startswith(head)
            region = constraint_region(ref, iid, kw)
            first_diff = next(i for i, (a, b) in enumerate(zip(ref, bad + "\0" * len(ref))) if a != b)
            # a removed line starts at the newline before the region
            assert any(a - 1 <= first_diff <= b for a, b in region), (iid, ref, bad)
            seen.add(iid)
    assert seen == set(IF_VIOLATIONS)


def test_in_region_and_concentration():
    q = torch.tensor([0.0, 0.1, 0.9, 0.8, 0.1])
    spans = [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert in_region(spans, [(4, 8)]) == [False, False, True, True, False]
    assert D.concentration(q) == pytest.approx(0.4)
    assert D.concentration(torch.ones(10)) == pytest.approx(0.8)
    assert math.isnan(D.concentration(torch.zeros(3)))


def test_js_profile_is_zero_for_identical_prompts(smoke_builds):
    from transformers import AutoModelForCausalLM

    tok = load_tok(smoke_builds[0])
    model = AutoModelForCausalLM.from_pretrained(smoke_builds[0]).eval()
    prompt = [{"role": "user", "content": "How many people live in Rome?"}]
    ((ids, text),) = sample(model, tok, [prompt], n=1, max_new_tokens=8, seed=0)[0]
    assert len(token_char_spans(tok, ids)) == len(ids)
    if ids:
        q = D.js_profile(model, tok, prompt, prompt, ids)
        assert q.shape == (len(ids),) and q.abs().max() < 1e-3
        other = [{"role": "user", "content": "How many people live in Oslo? Reference SQL: SELECT 1"}]
        assert D.js_profile(model, tok, prompt, other, ids).max() > 0


def test_a_local_folder_is_a_model_for_the_runner(smoke_builds, tmp_path, monkeypatch):
    """A folder of weights is resolved as given, takes the task's paper-scale hyperparameters, and names its
    run folders by its last part (the error message tells users to pass one)."""
    from mrtpo.runs import runner as runs

    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path))
    folder = str(smoke_builds[0])
    cfg = runs.resolve("sql", "gdpo", model=folder)
    assert cfg.scale == "real" and cfg.steps == model_spec(get_task("sql"), "7b").steps
    assert runs.base_path(cfg) == smoke_builds[0]
    assert cfg.base_identity == {"checkpoint": folder}
    assert runs.run_name(cfg, "0" * 64).startswith("gdpo-seed0-")
    with pytest.raises(ModelNotAvailable, match="no model weights"):
        runs.resolve("sql", "gdpo", model=str(tmp_path))


@pytest.mark.parametrize("gpus", [1, 8])
def test_plan_of_every_paper_model_keeps_the_papers_step(gpus, monkeypatch, tmp_path):
    from mrtpo.tasks import TASKS, get_task

    monkeypatch.setenv("MRTPO_DATA_DIR", str(tmp_path))  # no data: every file listed with where to get it
    for task in TASKS:
        for name in get_task(task).paper_models:
            plan = dry_run(get_task(task), name, gpus=gpus, print_plan=False)
            g = plan["geometry"]
            assert g["completions_per_step"] == g["generation_batch_size"] == plan["prompts_per_step"] * plan["num_generations"]
            assert g["completions_per_step"] // plan["num_generations"] == get_task(task).paper_run["prompts_per_step"]
            assert g["per_device_train_batch_size"] * g["gradient_accumulation_steps"] * gpus == g["completions_per_step"]
            assert all(not f["present"] and f["get_it_from"] for f in plan["data_files"])
            assert ("zero3_8gpu" in plan["launch"]) == (gpus > 1)


def test_a_run_folder_name_says_when_its_steps_are_not_the_default():
    from mrtpo.runs import runner as runs
    from mrtpo.runs.config import resolve

    assert runs.run_name(resolve("sql", "gdpo", steps=300), "0" * 64) == "gdpo-steps300-seed0-00000000"
    assert runs.run_name(resolve("sql", "mrtpo", steps=100), "0" * 64) == "mrtpo-beta0.5-seed0-00000000"
    assert runs.run_name(resolve("sql", "gdpo", "smoke"), "0" * 64) == "gdpo-seed0-00000000"  # the smoke size's own 2 steps
