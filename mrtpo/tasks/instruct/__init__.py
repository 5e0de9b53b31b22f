"""Instruction following: one reward per constraint, judged by the field's own checkers (IFEval, IFBench).

One idea a module, in reading order:

* ``checkers``: the registry's checkers, the part of a response they judge, and the official accuracies;
* ``data``: IFEval/IFBench JSONL, and the loaders of MulDimIF and AdvancedIF (judged outside this package);
* ``regions``: the characters each constraint's checker reads;
* ``synthetic``: the tiny scale's prompts under easy registry constraints, with references that satisfy them;
* ``task``: ``InstructionFollowing``, the slot rewards, Z blocks and check regions built from the above.
"""

from .task import InstructionFollowing

__all__ = ["InstructionFollowing"]
