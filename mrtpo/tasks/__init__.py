"""Tasks: data, verifiers (reward functions), Z blocks and check regions. See ``base.py``."""

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


__all__ = ["Task", "TASKS", "get_task"]
