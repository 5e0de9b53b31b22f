"""Loaders of the paper-scale benchmarks whose files are not here (BIRD dev, MulDimIF, AdvancedIF, HIR-16K, the
RLLA RL split): each takes a path and is checked on a few records written by the test, in the released layout."""

from __future__ import annotations

import json
import sqlite3

import pytest

from mrtpo.tasks.instruct.data import load_advancedif, load_muldimif
from mrtpo.tasks.sql.spider import load_bird


def test_bird_dev_layout(tmp_path):
    db_dir = tmp_path / "dev_databases" / "shop"
    db_dir.mkdir(parents=True)
    with sqlite3.connect(db_dir / "shop.sqlite") as conn:
        conn.execute("CREATE TABLE items (id INTEGER, price REAL)")
        conn.execute("INSERT INTO items VALUES (1, 2.5)")
    tables = [{"db_id": "shop", "table_names_original": ["items"],
               "column_names_original": [[-1, "*"], [0, "id"], [0, "price"]]}]
    (tmp_path / "dev_tables.json").write_text(json.dumps(tables))
    records = [{"question_id": 0, "db_id": "shop", "question": "Price of item 1?", "evidence": "price is in dollars",
                "SQL": "SELECT price FROM items WHERE id = 1", "difficulty": "simple"},
               {"question_id": 1, "db_id": "shop", "question": "How many items?", "evidence": "",
                "SQL": "SELECT count(*) FROM items", "difficulty": "simple"}]
    (tmp_path / "dev.json").write_text(json.dumps(records))
    data = load_bird(tmp_path)
    assert data["gold_sql"] == [r["SQL"] for r in records]
    assert data[0]["question"] == "Price of item 1?\nEvidence: price is in dollars" and data[1]["question"] == "How many items?"
    assert "items(id, price)" in data[0]["prompt"][0]["content"]
    assert data[0]["db_path"].endswith("dev_databases/shop/shop.sqlite")
    records[1].pop("SQL")
    (tmp_path / "dev.json").write_text(json.dumps(records))
    with pytest.raises(ValueError, match=r"record 1: needs 'question', 'SQL' and 'db_id'"):
        load_bird(tmp_path)


def test_muldimif_layout(tmp_path):
    records = [{"id": "100000473", "conversations": [{"role": "user", "content": "Describe X. Use at most 50 words."}],
                "constraints": [["Length", "Words", "At most 50 words"], ["Content", "Keywords", "Must include 'X'"]],
                "constraint_pattern": "Listing"},
               {"id": "3890", "conversations": [{"role": "user", "content": "How is tea made?"}],
                "constraints": [["Language", "English", "Capitalize each word"]], "constraint_pattern": "Incorporation"}]
    path = tmp_path / "test.json"
    path.write_text(json.dumps(records))
    data = load_muldimif(path)
    assert data["key"] == ["100000473", "3890"] and data["constraint_pattern"] == ["Listing", "Incorporation"]
    assert data[0]["prompt"] == records[0]["conversations"] and data[0]["prompt_text"] == "Describe X. Use at most 50 words."
    assert json.loads(data[0]["constraints"]) == records[0]["constraints"]
    records[1]["constraints"] = [["Language", "English"]]
    path.write_text(json.dumps(records))
    with pytest.raises(ValueError, match=r"test.json: record 1: 'constraints'"):
        load_muldimif(path)


def test_advancedif_layout(tmp_path):
    history = [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hi"},
               {"role": "assistant", "content": "Bonjour"}, {"role": "user", "content": "Name a fruit, one word."}]
    records = [{"conversation_history": history, "benchmark_name": "if_system_steerability_oss",
                "prompt_metadata": json.dumps({"rubrics": json.dumps(["Is in French?", "Is one word?"])})},
               {"conversation_history": json.dumps(history[1:2]), "prompt_metadata": {"rubrics": ["Greets back?"]}}]
    path = tmp_path / "advancedif.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    data = load_advancedif(path)
    assert data[0]["prompt"] == history and data[0]["prompt_text"] == "Name a fruit, one word."
    assert json.loads(data[0]["rubrics"]) == ["Is in French?", "Is one word?"] and data[1]["rubrics"] == '["Greets back?"]'
    assert data["benchmark"] == ["if_system_steerability_oss", ""]
    path.write_text(json.dumps({"conversation_history": history, "prompt_metadata": {}}) + "\nnot json\n")
    with pytest.raises(ValueError, match=r"advancedif.jsonl:2: invalid JSON"):
        load_advancedif(path)


def test_hir_training_file_in_ifeval_layout(tmp_path):
    """HIR-16K's first two subsets (IFEval- and IFBench-type constraints) load as IFEval-layout JSONL."""
    pytest.importorskip("if_verifiable")
    from mrtpo.tasks import get_task

    rows = [{"key": 1, "prompt": "Write a poem. End with 'Done.'", "instruction_id_list": ["startend:end_checker"],
             "kwargs": [{"end_phrase": "Done."}]},
            {"key": 2, "prompt": "List two fruits without commas.", "instruction_id_list": ["punctuation:no_comma", "count:word_count_range"],
             "kwargs": [{}, {"min_words": 2, "max_words": 10}]}]
    path = tmp_path / "hir16k.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    task = get_task("if", num_constraints=(1, 2))
    data = task.load(path)
    assert data["instruction_id_list"] == [r["instruction_id_list"] for r in rows]
    columns = {k: data[k][1:] for k in ("instruction_id_list", "kwargs", "prompt_text")}
    assert [f([[]], ["<think>x</think>\napple banana"], None, **columns) for f in task.reward_funcs()] == [[1.0], [1.0]]


def test_rlla_rl_split_parquet(tmp_path):
    """The RLLA RL split (rlla_4k/train.parquet, 3,920 rows) in ToolRL's verl layout."""
    pytest.importorskip("bfcl_eval")
    import pandas as pd

    from mrtpo.tasks.tools.rlla import load_rlla

    instruction = ("**Available Tools**\n1. Name: GetNews\nDescription: news\nParameters: "
                   '{"page": {"description": "p", "type": "int", "default": ""}}\n')
    gold = '<think>x</think>\n<tool_call>\n{"name": "GetNews", "parameters": {"page": 2}}\n</tool_call>'
    frame = pd.DataFrame([{"extra_info": {"instruction": instruction, "input": "<user> news </user>"},
                           "reward_model": {"ground_truth": gold}}] * 2)
    path = tmp_path / "train.parquet"
    frame.to_parquet(path)
    data = load_rlla(path)
    assert len(data) == 2 and json.loads(data[0]["ground_truth"]) == [{"GetNews": {"page": [2]}}]
