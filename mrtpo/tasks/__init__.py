"""Layer 2, tasks: data, verifiers (reward functions), Z blocks and check regions; everything task-specific.
See ``base.py``. ``get_task`` turns a name into a ``Task`` where a user names it (the CLI, a notebook,
``mrtpo.runs.config.resolve``); every layer below receives the object.

May import ``mrtpo.files`` and ``mrtpo.method``.
"""

from __future__ import annotations

import importlib

from .base import Task

#: task name -> "module:Class"; a fourth task registers itself here
TASKS = {
    "sql": "mrtpo.tasks.sql:TextToSQL",
    "if": "mrtpo.tasks.instruct:InstructionFollowing",
    "tool": "mrtpo.tasks.tools:ToolCalling",
}


def get_task(name: str, **kwargs) -> Task:
    """Instantiate a task by name (``sql``, ``if``, ``tool``)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(TASKS)}")
    module, cls = TASKS[name].split(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)


def paper_model_names() -> set[str]:
    """The registry names of the paper's models, over every task (``Task.paper_models``)."""
    return {name for key in TASKS for name in get_task(key).paper_models}


__all__ = ["Task", "TASKS", "get_task", "paper_model_names"]
