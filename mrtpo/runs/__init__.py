"""Layer 4, runs: a request (task, method, model, seed) becomes a run folder, trained once and read back in seconds.

* ``config``: the request validated and filled (``RunConfig``, ``resolve``), its task resolved once
  (``RunConfig.task_def``); ``runner``: identity, training, evaluation and the folder (``run``, ``find``,
  ``base_evaluation``); ``launch``: a run trained by ``accelerate launch`` on several processes from one kernel;
  ``evaluation``: a policy's benchmarks and a folder's evaluation files; ``plan``: a run's plan without weights.
* ``results``: a finished folder (``Run``) and the table of folders; ``behaviour``: the pinned behaviour
  fingerprints and which folders are stale; ``probes``: the probes those fingerprints hash.

May import ``mrtpo.files``, ``mrtpo.method``, ``mrtpo.tasks`` and ``mrtpo.models``.
"""

from mrtpo.runs.config import RunConfig, resolve
from mrtpo.runs.runner import base_evaluation, base_path, find, locate, run, train

__all__ = ["RunConfig", "base_evaluation", "base_path", "find", "locate", "resolve", "run", "train"]
