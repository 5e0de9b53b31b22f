"""LoRA adapters (TRL's ``peft_config``): the one thing the trainer must know of them.

With adapters the policy is ``W0 + B A`` and the starting policy is the same model with its adapters switched off
(``B = 0`` at initialisation), so OPSD's frozen teacher (``opsd_teacher="initial"``) needs no copy of the weights:
its forwards run under :func:`initial_policy`. Everything else goes through the adapters as it is: the replay and
the entropy recording call the wrapped model, whose decoder carries them; TRL's reference policy (``beta`` > 0) is
the model with adapters disabled, as TRL does it.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext


def has_adapters(model) -> bool:
    """Whether ``model`` (unwrapped from accelerate) is a PEFT model with adapters."""
    return hasattr(model, "peft_config") and hasattr(model, "disable_adapter")


@contextmanager
def initial_policy(model):
    """Within: ``model`` computes as at its starting weights where it has adapters (disabled); unchanged otherwise."""
    with model.disable_adapter() if has_adapters(model) else nullcontext():
        yield model
