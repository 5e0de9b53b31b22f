"""MRTPO: each reward's advantage to its relevant tokens (reward-specific token-level credit assignment).

``MRTPOConfig`` / ``MRTPOTrainer`` are drop-in replacements of TRL's ``GRPOConfig`` / ``GRPOTrainer``.
"""

__version__ = "0.1.0"


def __getattr__(name):  # import the trainer (and TRL) only when asked for
    if name in ("MRTPOConfig", "MRTPOTrainer"):
        from mrtpo.method import trainer

        return getattr(trainer, name)
    if name == "METHODS":
        from mrtpo.method.advantages import METHODS

        return METHODS
    raise AttributeError(name)


__all__ = ["MRTPOConfig", "MRTPOTrainer", "METHODS", "__version__"]
