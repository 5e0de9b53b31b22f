"""Execution accuracy: the official test-suite-sql-eval rule (multiset of rows, order only with ORDER BY,
columns matched up to a permutation), checked against a transcription of its ``result_eq``."""

from __future__ import annotations

from collections import defaultdict
from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from mrtpo.tasks.sql import TextToSQL
from mrtpo.tasks.sql.match import results_match
from mrtpo.tasks.sql.sandbox import ExecResult
from mrtpo.tasks.sql.synthetic import synthetic_databases


def official_result_eq(result1: list, result2: list, order_matters: bool) -> bool:
    """taoyds/test-suite-sql-eval ``exec_eval.result_eq`` (result1 = gold, result2 = prediction), with every
    column permutation enumerated (the original samples 20 rows to prune them first: same verdict)."""

    def unorder_row(row):
        return tuple(sorted(row, key=lambda x: str(x) + str(type(x))))

    def multiset_eq(l1, l2):
        if len(l1) != len(l2):
            return False
        d = defaultdict(int)
        for e in l1:
            d[e] += 1
        for e in l2:
            d[e] -= 1
            if d[e] < 0:
                return False
        return True

    if len(result1) == 0 and len(result2) == 0:
        return True
    if len(result1) != len(result2):
        return False
    num_cols = len(result1[0])
    if len(result2[0]) != num_cols:
        return False
    s1, s2 = [unorder_row(r) for r in result1], [unorder_row(r) for r in result2]
    if not (s1 == s2 if order_matters else set(s1) == set(s2)):
        return False
    for perm in product(*[range(num_cols)] * num_cols):
        if len(perm) != len(set(perm)):
            continue
        result2_perm = [tuple(e[i] for i in perm) for e in result2]
        if order_matters:
            if result1 == result2_perm:
                return True
        elif set(result1) == set(result2_perm) and multiset_eq(result1, result2_perm):
            return True
    return False


def rows(*r) -> ExecResult:
    return ExecResult(rows=tuple(r))


def test_columns_match_up_to_a_permutation_and_rows_as_a_multiset():
    gold = rows(("ann", 30), ("bob", 40), ("bob", 40))
    assert results_match(rows((30, "ann"), (40, "bob"), (40, "bob")), gold, ordered=False)
    assert results_match(rows((40, "bob"), (30, "ann"), (40, "bob")), gold, ordered=False)
    assert not results_match(rows((40, "bob"), (30, "ann"), (40, "bob")), gold, ordered=True)  # ORDER BY: order counts
    assert results_match(rows((30, "ann"), (40, "bob"), (40, "bob")), gold, ordered=True)  # permuted columns, same order
    assert not results_match(rows((30, "ann"), (30, "ann"), (40, "bob")), gold, ordered=False)  # multiplicities count
    assert not results_match(rows(("ann",), ("bob",), ("bob",)), gold, ordered=False)  # a column missing
    assert not results_match(rows(("ann", 30), ("bob", 40)), gold, ordered=False)
    assert results_match(rows(), rows(), ordered=False) and not results_match(rows(), gold, ordered=False)
    assert results_match(rows((2.0,)), rows((2,)), ordered=False)  # Python equality, as the official code
    assert not results_match(ExecResult(error="boom"), gold, ordered=False)
    assert not results_match(ExecResult(rows=gold.rows, truncated=True), gold, ordered=False)
    # a column permutation must be one permutation for all rows, not one per row
    assert not results_match(rows((1, 2), (3, 4)), rows((1, 2), (4, 3)), ordered=False)


cell = st.sampled_from([0, 1, 2, "a", None])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4).flatmap(lambda c: st.tuples(
    st.lists(st.tuples(*[cell] * c), max_size=5), st.lists(st.tuples(*[cell] * c), max_size=5),
    st.permutations(range(c)), st.booleans(), st.booleans())))
def test_agrees_with_the_official_result_eq(case):
    gold, pred, perm, ordered, derive = case
    if derive:  # a prediction that differs from gold only by column order (and row order, unordered case)
        pred = [tuple(r[i] for i in perm) for r in gold]
        pred = pred if ordered else pred[::-1]
    assert results_match(rows(*pred), rows(*gold), ordered) == official_result_eq(gold, pred, ordered)


def test_wide_identical_columns_are_tried_once():
    """13 columns (13! orders): identical pred columns are interchangeable, so this returns at once."""
    gold = rows(*[(1,) * 12 + (2,)] * 3)
    assert not results_match(rows(*[(1,) * 13] * 3), gold, ordered=False)
    assert results_match(rows(*[(2,) + (1,) * 12] * 3), gold, ordered=False)
    assert not results_match(rows(*[(1,) * 12 + (3,)] * 3), gold, ordered=False)


def test_execution_match_reward_accepts_swapped_columns(tmp_path):
    task = TextToSQL(timeout_s=1.0, db_cache_dir=tmp_path)
    db = str(synthetic_databases(0, tmp_path)[0])
    match = dict(zip(task.reward_names, task.reward_funcs()))["execution_match"]
    cols = {"db_path": [db] * 3, "gold_sql": ["SELECT name, age FROM people ORDER BY age"] * 3}
    answers = [f"<think>t</think><answer>{sql}</answer>" for sql in (
        "SELECT age, name FROM people ORDER BY age", "SELECT name, age FROM people ORDER BY age DESC", "SELECT name FROM people")]
    assert match([[]] * 3, answers, completion_ids=None, **cols) == [1.0, 0.0, 0.0]
