"""Tool calling: a format reward and a correctness reward judged by BFCL's official AST checker.

One idea a module, in reading order:

* ``calls``: the response layout, the format verdict, and the calls read out of the ``<tool_call>`` blocks;
* ``checker``: BFCL's official AST checker, and the gold calls it accepts;
* ``data``: rows in BFCL's shapes (tool list and layout in the system prompt), and BFCL v4's categories;
* ``rlla``: ToolRL (RLLA) records typed into BFCL's shapes;
* ``synthetic``: the tiny scale's small-vocabulary tools, queries and gold calls;
* ``task``: ``ToolCalling``, the rewards, Z blocks and check regions built from the above.
"""

from .task import ToolCalling

__all__ = ["ToolCalling"]
