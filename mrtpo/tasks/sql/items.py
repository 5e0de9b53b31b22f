"""The items of a query, as sqlglot parses it: what the sub-verifiers compare and where they sit in the SQL.

Each sub-verifier compares one set of canonical items of answer and gold: tables (``sql_tables``), selected
columns (``sql_columns``), WHERE predicates (``sql_where``) and JOINs (``sql_joins``).
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

#: the sub-verifiers, each named by the kind of item it compares (``sql_items``)
SUB_VERIFIERS = ("sql_tables", "sql_columns", "sql_where", "sql_joins")
#: longer "SQL" is not parsed by sqlglot (pure-Python parsing of megabytes of garbage takes seconds)
_MAX_PARSE_CHARS = 20_000


@functools.lru_cache(maxsize=2048)
def parse_sql(sql: str) -> exp.Expression | None:
    """sqlglot's tree of ``sql`` (SQLite dialect), or None when it does not parse or is too long.

    Cached because every sub-verifier parses the same gold and answer; callers never mutate a tree
    (``_normalise`` transforms a copy)."""
    if len(sql) > _MAX_PARSE_CHARS:
        return None
    try:
        return sqlglot.parse_one(sql, read="sqlite")
    except Exception:  # sqlglot raises ParseError and, on odd input, other errors
        return None


def _normalise(node: exp.Expression, aliases: dict[str, str] | None) -> str:
    """Canonical text of one item: identifiers lower-cased, table qualifiers dropped (``aliases`` None)
    or resolved to table names, ``"x"`` read as the string ``'x'`` (Spider's habit), EQ sides sorted."""

    def canonical(n: exp.Expression) -> exp.Expression:
        if not (isinstance(n, exp.Column) and isinstance(n.this, exp.Identifier)):
            return n
        qualifier = n.table.lower()
        if n.this.quoted and not qualifier:
            return exp.Literal.string(n.name)
        table = aliases.get(qualifier, qualifier) if aliases is not None and qualifier else None
        return exp.column(n.name.lower(), table=table)

    node = (node.this if isinstance(node, exp.Alias) else node).transform(canonical)
    if isinstance(node, exp.EQ):
        left, right = sorted((node.this.sql(dialect="sqlite"), node.expression.sql(dialect="sqlite")))
        return f"{left} = {right}"
    return node.sql(dialect="sqlite")


def _where_atoms(node: exp.Expression) -> list[exp.Expression]:
    """The atomic predicates of a condition: AND/OR/parentheses are split, everything else is one atom."""
    if isinstance(node, (exp.And, exp.Or)):
        return _where_atoms(node.this) + _where_atoms(node.expression)
    if isinstance(node, exp.Paren):
        return _where_atoms(node.this)
    return [node]


def sql_items(tree: exp.Expression, kind: str) -> list[tuple[str, exp.Expression]]:
    """(canonical text, node) for every item of ``kind`` (a sub-verifier name) in a parsed query."""
    if kind == "sql_tables":
        return [(t.name.lower(), t) for t in tree.find_all(exp.Table)]
    if kind == "sql_columns":
        return [(_normalise(p, None), p) for p in getattr(tree, "selects", [])]
    if kind == "sql_where":
        return [(_normalise(a, None), a) for w in tree.find_all(exp.Where) for a in _where_atoms(w.this)]
    if kind == "sql_joins":
        # aliases resolve to table names so that "T1.id = T2.x" and "people.id = orders.x" agree
        aliases = {t.alias.lower(): t.name.lower() for t in tree.find_all(exp.Table) if t.alias}
        items = []
        for join in tree.find_all(exp.Join):
            on = join.args.get("on")
            key = _normalise(on, aliases) if on else f"join {join.this.sql(dialect='sqlite').lower()}"
            items.append((key, join))
        return items
    raise ValueError(f"unknown sub-verifier {kind!r}")


def node_span(node: exp.Expression, sql: str) -> tuple[int, int] | None:
    """Span from the first to the last token sqlglot located inside ``node``, closing parentheses added.

    sqlglot records positions on identifiers, literals and some functions, not on keywords, so the span
    is the best exact substring location available (e.g. ``x IS NULL`` covers only ``x``)."""
    positions = [(n.meta["start"], n.meta["end"] + 1) for n in node.walk() if "start" in n.meta]
    if not positions:
        return None
    start, end = min(p[0] for p in positions), max(p[1] for p in positions)
    while sql.count("(", start, end) > sql.count(")", start, end):
        close = sql.find(")", end)
        if close < 0:
            break
        end = close + 1
    return start, end


def describe_query(gold_sql: str) -> str:
    """A one-line reasoning for a gold query: its tables and literal values."""
    tree = parse_sql(gold_sql)
    if tree is None:
        return "Write the query."
    tables = list(dict.fromkeys(t.name for t in tree.find_all(exp.Table)))
    values = list(dict.fromkeys(str(v.this) for v in tree.find_all(exp.Literal)))
    text = f"Use table {', '.join(tables)}" if tables else "Write the query"
    return text + (f" and value {', '.join(values)}." if values else ".")
