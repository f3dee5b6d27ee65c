"""How the loops call the user's steps: with the arguments they take, and for a loss.

``training_step(self, batch)`` without ``batch_idx`` is allowed, and
``training_step`` may return the loss or a dict holding it: these functions
adapt the call and read the loss, with errors that say what to return.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import torch


def fit_step_arguments(
    step: Callable[..., Any], method: Callable[..., Any], passed: int = 3
) -> Callable[..., Any]:
    """``step``, called with only as many positional arguments as ``method`` takes.

    ``training_step(self, batch)`` without ``batch_idx`` is allowed (as in
    Lightning): it is called with the batch alone. A step that takes all the
    ``passed`` arguments is returned as it is, so the common case costs nothing.

    Args:
        step: what runs the step (possibly through a strategy's wrapper).
        method: the user's bound step method, whose signature decides.
        passed: the most positional arguments the loop passes (``batch``,
            ``batch_idx``, ``dataloader_idx``; training passes two).

    Example:
        >>> def training_step(batch):
        ...     return batch
        >>> fit_step_arguments(training_step, training_step)("b", 0, 0)
        'b'
    """
    _refuse_removed_hook(method)
    try:
        parameters = _parameters(method)
    except (TypeError, ValueError):  # no signature: pass everything
        return step
    if parameters and parameters[0].name == "dataloader_iter":
        name = getattr(method, "__name__", "step")
        raise NotImplementedError(
            f"{name}(dataloader_iter): trainkit's loops pass each step its batch, not the "
            "dataloader's iterator (Lightning's dataloader_iter steps), so that every "
            "batch is counted, limited and resumed exactly. Take (batch, batch_idx) and "
            "keep what spans batches on the Module."
        )
    if getattr(method, "__name__", "") == "training_step" and any(
        p.name == "optimizer_idx" for p in parameters
    ):
        raise RuntimeError(  # Lightning's words first
            "Training with multiple optimizers is only supported with manual optimization. "
            "Remove the `optimizer_idx` argument from `training_step`, set "
            "`self.automatic_optimization = False` and access your optimizers in "
            "`training_step` with `opt1, opt2, ... = self.optimizers()`: trainkit calls "
            "training_step once a batch, never once per optimizer."
        )
    kinds = [p.kind for p in parameters]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return step
    taken = sum(
        kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for kind in kinds
    )
    if taken >= passed:
        return step

    def called(*args: Any) -> Any:
        return step(*args[:taken])

    return called


def defined_step(module: Any, name: str, entry: Any) -> Callable[..., Any]:
    """The Module's method ``name`` (a step, ``configure_optimizers``), which ``entry``
    (a Trainer method) needs.

    Raises:
        NotImplementedError: it is set to None (or is no method), as code written for
            Lightning does to turn a step off, where this entry point needs it.

    Example:
        >>> class Net(torch.nn.Module):
        ...     test_step = None
        >>> try:
        ...     defined_step(Net(), "test_step", "test")
        ... except NotImplementedError as error:
        ...     print(str(error)[:56])
        No `test_step()` method defined to run `Trainer.test`: N
    """
    method: Callable[..., Any] | None = getattr(module, name, None)
    if method is None or not callable(method):  # Lightning's words first
        raise NotImplementedError(
            f"No `{name}()` method defined to run `Trainer.{getattr(entry, 'value', entry)}`: "
            f"{type(module).__name__}.{name} is {method!r}. Define it, or drop what sets it to "
            "None."
        )
    return method


#: The epoch-end hooks Lightning 2.0 removed, by the step whose outputs they received,
#: with the hook that replaces each.
_REMOVED_HOOKS = {
    "training_step": ("training_epoch_end", "on_train_epoch_end"),
    "validation_step": ("validation_epoch_end", "on_validation_epoch_end"),
    "test_step": ("test_epoch_end", "on_test_epoch_end"),
}


def _refuse_removed_hook(method: Callable[..., Any]) -> None:
    # A Module written for Lightning 1.x: its epoch-end hook would never run, silently.
    removed = _REMOVED_HOOKS.get(getattr(method, "__name__", ""))
    module = getattr(method, "__self__", None)
    if removed is None or module is None or not callable(getattr(module, removed[0], None)):
        return
    old, new = removed
    raise NotImplementedError(  # Lightning's words first
        f"Support for `{old}` has been removed in v2.0.0. `{type(module).__name__}` implements "
        f"this method. You can use the `{new}` hook instead. To access outputs, save them "
        f"in-memory as instance attributes (append them in the step, read and clear them in "
        f"`{new}`): trainkit calls no `{old}`."
    )


def _parameters(method: Callable[..., Any]) -> list[inspect.Parameter]:
    # A bound method's parameters as its class defines them: a strategy may replace the
    # instance's method with a wrapper (FSDP gathers parameters around each step), whose
    # copied signature would otherwise lose one more parameter when bound.
    owner, name = getattr(method, "__self__", None), getattr(method, "__name__", None)
    if owner is not None and isinstance(name, str):
        defined = inspect.getattr_static(type(owner), name, None)
        if inspect.isfunction(defined):
            return list(inspect.signature(defined).parameters.values())[1:]  # without self
    return list(inspect.signature(method).parameters.values())


class LossError(ValueError, RuntimeError):
    """A loss that backward cannot run on (not a scalar, or not connected to a parameter).

    A ``ValueError``, as trainkit raises for a value that cannot be used, and also a
    ``RuntimeError``: what ``loss.backward()`` raises for it, which code written for
    Lightning (which lets backward fail) catches.
    """


def loss_from_output(output: Any, step_index: int) -> torch.Tensor:
    """Return the loss from what ``training_step`` returned, or explain what is wrong.

    Args:
        output: the value ``training_step`` returned.
        step_index: the global step, for the error message.
    """
    # Fast path for the common case: a scalar tensor attached to the graph.
    if type(output) is torch.Tensor and output.requires_grad and output.numel() == 1:
        return output
    loss = output.get("loss") if isinstance(output, Mapping) else output
    if output is None:
        raise ValueError(
            f"training_step returned None at step {step_index}. Return the loss tensor "
            "(or a dict with a 'loss' entry); to step optimizers yourself, set "
            "`self.automatic_optimization = False` in __init__."
        )
    if isinstance(output, Mapping) and "loss" not in output:
        raise ValueError(
            f"training_step returned a dict without a 'loss' entry (keys: {sorted(output)}) "
            f"at step {step_index}. Put the loss tensor under the key 'loss'."
        )
    if not isinstance(loss, torch.Tensor):
        raise TypeError(
            f"training_step must return a loss tensor, got {type(loss).__name__} at step "
            f"{step_index}. Return the tensor itself, not `loss.item()`."
        )
    if loss.numel() != 1:
        raise LossError(
            f"training_step returned a loss of shape {tuple(loss.shape)} at step {step_index}; "
            "the loss must be a scalar. Reduce it, e.g. `loss.mean()`."
        )
    if not loss.requires_grad:
        raise LossError(
            f"training_step returned a loss that does not require grad at step {step_index}: "
            "it is not connected to any trainable parameter (was it computed under "
            "torch.no_grad(), detached, or are all parameters frozen?)."
        )
    return loss
