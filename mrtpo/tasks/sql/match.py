"""Spider execution accuracy: when two query results count as the same (the official test-suite-sql-eval rule).

The execution_match reward and evaluation both use this rule: result multisets, row order only when the gold
query has ORDER BY, columns matched up to a permutation.
"""

from __future__ import annotations

import re
from collections import Counter

from .sandbox import ExecResult

_ORDER_BY_RE = re.compile(r"\border\s+by\b", re.I)


def gold_is_ordered(gold_sql: str) -> bool:
    """Whether row order counts when comparing with this gold query's result: it has ORDER BY."""
    return _ORDER_BY_RE.search(gold_sql) is not None


#: column permutations tried at most before a pair of results is declared different (see ``results_match``)
MAX_COLUMN_PERMUTATIONS = 40_320  # 8!


def _unordered_row(row: tuple) -> tuple:
    """A row's values sorted, as test-suite-sql-eval's ``unorder_row`` sorts them (key ``str(x) + str(type(x))``)."""
    return tuple(sorted(row, key=lambda x: str(x) + str(type(x))))


def _column_permutations(pred: tuple, gold: tuple):
    """Every assignment of pred columns to gold columns that could make the results equal, without repeats.

    Gold column i can take pred column j only if both hold the same set of values (necessary for any
    permutation to work); pred columns that are identical vectors are interchangeable, so only one is tried.
    """
    n = len(gold[0])
    gold_sets = [{row[i] for row in gold} for i in range(n)]
    pred_cols = [tuple(row[j] for row in pred) for j in range(n)]
    pred_sets = [set(col) for col in pred_cols]
    candidates = [[j for j in range(n) if pred_sets[j] == gold_sets[i]] for i in range(n)]
    perm: list[int] = []

    def extend(i: int):
        if i == n:
            yield tuple(perm)
            return
        tried = set()
        for j in candidates[i]:
            if j in perm or pred_cols[j] in tried:
                continue
            tried.add(pred_cols[j])
            perm.append(j)
            yield from extend(i + 1)
            perm.pop()

    yield from extend(0)


def results_match(pred: ExecResult, gold: ExecResult, ordered: bool) -> bool:
    """Spider execution accuracy, with the official test-suite-sql-eval rule (``exec_eval.result_eq``).

    Equal when some permutation of pred's columns makes pred's rows equal to gold's: as a multiset, or as a
    list when ``ordered`` (the gold query has ORDER BY). So ``SELECT name, age`` matches ``SELECT age, name``,
    while a different number of rows or columns never matches; two empty results match. Values compare with
    Python equality (``2 == 2.0``), as the official code does. Differences from it, both in the direction of
    "not equal": a result cut at the row cap cannot be verified and never matches, and after
    ``MAX_COLUMN_PERMUTATIONS`` candidate permutations (only wide results whose columns share one value set
    get there) the pair is declared different, so a hostile query cannot make the reward run for minutes.
    """
    if not (pred.ok and gold.ok) or pred.truncated or gold.truncated:
        return False
    if not pred.rows and not gold.rows:
        return True
    if len(pred.rows) != len(gold.rows) or len(pred.rows[0]) != len(gold.rows[0]):
        return False
    # necessary condition, cheap: the rows with their values sorted agree (as a list or as a multiset)
    pred_unordered, gold_unordered = map(lambda r: [_unordered_row(x) for x in r], (pred.rows, gold.rows))
    if (pred_unordered != gold_unordered) if ordered else (Counter(pred_unordered) != Counter(gold_unordered)):
        return False
    gold_rows = list(gold.rows) if ordered else Counter(gold.rows)
    for tried, perm in enumerate(_column_permutations(pred.rows, gold.rows)):
        if tried >= MAX_COLUMN_PERMUTATIONS:
            return False
        permuted = [tuple(row[j] for j in perm) for row in pred.rows]
        if (permuted if ordered else Counter(permuted)) == gold_rows:
            return True
    return False
