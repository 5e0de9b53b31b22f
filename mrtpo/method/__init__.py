"""Layer 1, the method: everything ``MRTPOConfig`` / ``MRTPOTrainer`` need, and nothing of runs, models or books.

* ``advantages``: every scheme's advantages from rewards and token profiles (GRPO, GDPO, MRTPO and its controls),
  the one list of methods (``METHODS``); pure tensor math.
* ``contexts``: the replay's prompts P_all / P_minus_k from the Z blocks; ``replay``: their forwards and the
  JS relevance q; ``relevance``: the JS divergence, its rounding floor, concentration and profile statistics;
  ``regions``: check regions and the check-region ratio; ``distillation``: the OPSD term.
* ``trainer``: the Config + Trainer pair; it orchestrates score -> replay -> advantages -> TRL's loss and holds no
  formula; ``trainer_logs``: what it logs.

May import ``mrtpo.files`` only (and TRL, transformers, torch).
"""

from mrtpo.method.advantages import METHODS

__all__ = ["METHODS", "MRTPOConfig", "MRTPOTrainer"]


def __getattr__(name):  # the trainer (and TRL) only when asked for
    if name in ("MRTPOConfig", "MRTPOTrainer"):
        from mrtpo.method import trainer

        return getattr(trainer, name)
    raise AttributeError(name)
