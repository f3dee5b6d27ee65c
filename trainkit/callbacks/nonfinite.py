"""NonFiniteLoss: stop (or skip the step) when the training loss is NaN or infinite."""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.callbacks.slots import StepSlots
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

ACTIONS = ("raise", "skip", "warn")
#: Check each CPU loss at once (reading it costs no synchronisation). The device
#: tests set it False to run the accelerator's path, which reads no loss between
#: checks, on the CPU.
READ_CPU_LOSSES_AT_ONCE = True


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite."""


class NonFiniteLoss(Callback):
    """Watch the training loss for NaN and infinity.

    ``"raise"`` (the default, added by every Trainer) stops training with an
    error naming the step and the last finite loss. On the CPU each loss is
    checked at once (reading it costs no synchronisation). On an accelerator,
    to keep the promise of no host-device synchronisation per step, losses are
    checked in one read every ``log_every_n_steps`` steps, at each epoch's end
    and before every checkpoint is written, so a checkpoint never holds a state
    trained on a NaN loss.

    ``"skip"`` skips the optimizer step (the whole accumulation window) whose loss
    is not finite and carries on. It must decide before each step, so it reads
    the loss every step: a synchronisation per step on a GPU. With several
    processes they decide together (one small collective per step): a step is
    skipped on every process when any process's loss was not finite, since the
    gradient reduction has carried that loss's NaN into every process's
    gradients.

    ``"warn"`` trains on, as a framework without this check does: the first
    non-finite loss of a fit is reported in a warning (its step, the last finite
    loss), and every such step is listed in :attr:`nonfinite_steps`; the weights
    may then hold NaN, and so may the checkpoints written after it. It reads the
    losses as ``"raise"`` does.

    Steps that a float16 gradient scaler skips (its gradients overflowed while the
    loss was finite) are normal and not reported.

    Args:
        action: "raise", "skip" or "warn".
    """

    def __init__(self, action: str = "raise") -> None:
        if action not in ACTIONS:
            raise ValueError(f"NonFiniteLoss(action={action!r}) must be 'raise', 'skip' or 'warn'.")
        self.action = action
        self.skipped_steps: list[int] = []
        #: With "warn": the steps whose loss was not finite, in this fit.
        self.nonfinite_steps: list[int] = []
        self._pending: list[tuple[int, torch.Tensor]] = []
        self._last_finite: tuple[int, float] | None = None
        self._window_finite = True
        self._check_every = 50
        self._agree: Any = None  # the strategy's reduce_boolean_decision, with several processes

    def configure_step(self, slots: StepSlots) -> None:
        """Fill the step's non-finite loss slot."""
        slots.set_nonfinite(self)

    @property
    def vetoes_steps(self) -> bool:
        """Whether it decides before each step ("skip"), reading each loss."""
        return self.action == "skip"

    def on_train_start(self, trainer: Trainer, module: Module) -> None:
        self._pending.clear()
        self.nonfinite_steps = []
        self._window_finite = True
        self._check_every = trainer.log_every_n_steps
        several = trainer.world_size > 1
        self._agree = trainer.strategy.reduce_boolean_decision if several else None

    def observe(self, loss: torch.Tensor, global_step: int) -> None:
        """See the loss of a batch before backward.

        Args:
            loss: the loss as the step returned it.
            global_step: the step it belongs to (for the error message).
        """
        if self.action == "skip":
            finite = bool(torch.isfinite(loss.detach()))
            self._window_finite = self._window_finite and finite
            return
        if loss.is_cpu and READ_CPU_LOSSES_AT_ONCE:
            # On the CPU a value is read without any synchronisation: check it now.
            # (Holding each loss until a batched read cost more than the read: the
            # allocator worked harder; figures in docs/performance.md.)
            value = loss.item()
            if math.isfinite(value):
                self._last_finite = (global_step, value)
                return
            self._pending.append((global_step, loss.data))
            self.check()  # raises (or warns), naming this step
            return
        # Without its autograd graph: holding the loss itself would keep the graph
        # alive until the check, which slowed DDP steps of a tiny model by ~5-10%.
        # (.data, not .detach(): the check only reads the value, and .data skips
        # the dispatcher.)
        self._pending.append((global_step, loss.data))
        if len(self._pending) >= self._check_every:
            self.check()

    def allow_step(self, global_step: int) -> bool:
        """Whether the optimizer may step: not after a non-finite loss in this window.

        Args:
            global_step: the step about to be taken (recorded when skipped).
        """
        finite = self._window_finite
        if self._agree is not None:  # every process, before every step: one decision
            finite = self._agree(finite, all=True, point="NonFiniteLoss's decision to step")
        if finite:
            return True
        self.skipped_steps.append(global_step)
        return False

    def end_window(self) -> None:
        """The gradients were cleared: a new window starts finite."""
        self._window_finite = True

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        self.check()

    def on_train_end(self, trainer: Trainer, module: Module) -> None:
        self.check()

    def on_save_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        self.check()  # never write a checkpoint trained on a NaN loss

    def check(self) -> None:
        """Read the losses seen since the last check; raise (or warn) at the first non-finite."""
        if not self._pending:
            return
        steps = [step for step, _ in self._pending]
        losses = _read(self._pending)
        self._pending.clear()
        bad = next((i for i, value in enumerate(losses) if not math.isfinite(value)), None)
        if bad is None:
            self._last_finite = (steps[-1], losses[-1])
            return
        if bad > 0:
            self._last_finite = (steps[bad - 1], losses[bad - 1])
        last = (
            f"the last finite loss was {self._last_finite[1]:.6g} at step {self._last_finite[0]}"
            if self._last_finite is not None
            else "no finite loss was seen before it"
        )
        if self.action == "warn":
            first = not self.nonfinite_steps
            self.nonfinite_steps += [
                s for s, v in zip(steps, losses, strict=True) if not math.isfinite(v)
            ]
            if first:
                warnings.warn(
                    f"The training loss is {losses[bad]} at step {steps[bad]} ({last}); "
                    "training goes on (NonFiniteLoss('warn')), and the weights may hold NaN "
                    "from here. Later non-finite steps are listed in nonfinite_steps.",
                    stacklevel=2,
                )
            finite = [(s, v) for s, v in zip(steps, losses, strict=True) if math.isfinite(v)]
            self._last_finite = finite[-1] if finite else self._last_finite
            return
        raise NonFiniteLossError(
            f"The training loss is {losses[bad]} at step {steps[bad]} ({last}). "
            "Common causes: a learning rate too high (lower it, or warm it up), exploding "
            "gradients (Trainer(gradient_clip_val=1.0)), NaN or inf in the inputs, or "
            "float16 overflow (use precision='bf16-mixed'). To skip such steps instead, "
            "pass callbacks=[NonFiniteLoss('skip')]; to train on with a warning, "
            "NonFiniteLoss('warn')."
        )


def _read(pending: list[tuple[int, torch.Tensor]]) -> list[float]:
    """The pending losses as floats, in one device synchronisation at most."""
    if all(loss.is_cpu for _, loss in pending):
        # On the CPU reading a value costs no synchronisation: read each directly
        # (a third of the cost of stacking them first).
        return [loss.item() for _, loss in pending]
    # On an accelerator: one op for all of them, one copy to the host (a loss
    # may be shape () or (1,): flatten first).
    scalars = [loss if loss.ndim == 0 else loss.reshape(()) for _, loss in pending]
    return torch.stack(scalars).float().cpu().tolist()
