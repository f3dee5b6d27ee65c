"""``Trainer(compile=...)``: ``torch.compile`` on the module's forward, and what trainkit adds.

The same happens when an entry point receives what ``torch.compile(module)``
returned (Lightning's way of compiling): the run uses the module it wraps, whose
forward is compiled with that call's own settings (:func:`compiled_parts`).

The forward is compiled in place with ``nn.Module.compile`` (torch's own), after the
strategy has wrapped the module: parameter names, and so checkpoint keys, stay
the uncompiled ones (no ``_orig_mod.`` prefix), so a compiled run's checkpoint
loads without compiling and the other way round. Under DDP the compiled forward
runs inside DDP's forward, where torch's DDP optimizer
(``torch._dynamo.config.optimize_ddp``) splits the graph at DDP's gradient buckets.
Under FSDP the module is its own wrapper: torch runs FSDP's hooks (gathering and
freeing each shard unit's parameters) uncompiled, between the compiled pieces.

trainkit adds two things around torch's machinery:

- a compiler failure (no C++ compiler for inductor, a backend error) becomes one
  :class:`CompileError` line saying what failed and how to go on, instead of
  torch's long traceback;
- a recompilation caused by an input's shape changing (a smaller last batch,
  variable-length inputs) is warned about once per run, with what to do, instead
  of being silently slow (torch recompiles for each new shape up to
  ``torch._dynamo.config.recompile_limit``, then runs the forward uncompiled).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from torch import nn

from trainkit.utilities.messages import UsageError

#: What torch says when a guard on a tensor's shape fails (a recompilation for a new shape).
_SHAPE_CHANGE = re.compile(r"size mismatch|stride mismatch|dimensionality|\bdim\b|shape")


class CompileError(UsageError, RuntimeError):
    """``torch.compile`` is unavailable or failed; the message says what and how to go on."""


#: A compiling context: what ``torch.compile`` wraps a function with (an
#: ``OptimizedModule``'s ``dynamo_ctx``), carrying that call's backend and settings.
CompileContext: TypeAlias = Callable[[Callable[..., Any]], Callable[..., Any]]


def compiled_parts(model: object) -> tuple[nn.Module, CompileContext] | None:
    """``(module, context)`` when ``model`` is what ``torch.compile(module)`` returned, else None.

    Args:
        model: anything an entry point received as its model.

    Example:
        >>> import torch
        >>> compiled_parts(torch.nn.Linear(2, 2)) is None
        True
    """
    # An OptimizedModule exists only once torch._dynamo is imported: without it,
    # nothing to check (and nothing imported, which would cost a second).
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None or not isinstance(model, dynamo.OptimizedModule):
        return None
    return model._orig_mod, model.dynamo_ctx


def compile_forward(
    module: nn.Module,
    how: Mapping[str, Any] | CompileContext,
    warn: Callable[[str], None],
) -> Callable[[], None]:
    """Compile ``module``'s forward in place.

    Args:
        module: the user's module (its ``__call__`` goes through the compiled code).
        how: ``torch.compile`` keyword arguments (``module.compile(**how)``), or the
            context of an earlier ``torch.compile(module, ...)`` call, whose settings
            are then used (:func:`compiled_parts`).
        warn: how to warn about a recompilation for a new input shape (once).

    Returns:
        What undoes it: the module calls its forward as before, and the
        recompilation watch stops.
    """
    before = module._compiled_call_impl
    name = type(module).__name__
    by_trainer = isinstance(how, Mapping)  # else: the user's torch.compile(module) call
    options: Mapping[str, Any] = how if isinstance(how, Mapping) else {}
    try:
        if isinstance(how, Mapping):
            module.compile(**how)
        else:  # what module.compile does, with the context torch.compile(module) made
            module._compiled_call_impl = how(module._call_impl)
    except Exception as error:  # e.g. a Python version torch.compile does not support
        raise CompileError(
            f"torch.compile is not available here: {_first_line(error)} (train without it: "
            "compile=False)."
        ) from None
    from torch._dynamo.exc import BackendCompilerFailed  # loaded by module.compile already

    compiled = module._compiled_call_impl
    assert compiled is not None
    watch = _RecompileWatch()

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = compiled(*args, **kwargs)
        except BackendCompilerFailed as error:
            raise CompileError(_failure_message(name, options, error, by_trainer)) from None
        if watch.reason is not None and not watch.warned:
            watch.warned = True
            warn(_recompile_message(name, watch.reason, by_trainer))
        return result

    module._compiled_call_impl = call
    watch.start()

    def undo() -> None:
        watch.stop()
        module._compiled_call_impl = before

    return undo


class _RecompileWatch:
    """Notes the first recompilation torch makes because an input's shape changed.

    torch's compile callbacks say when a compilation ends; the reason a
    recompilation happened is the newest guard failure torch recorded.
    """

    def __init__(self) -> None:
        self.reason: str | None = None
        self.warned = False
        self._seen: dict[Any, int] = {}

    def start(self) -> None:
        from torch._dynamo.callback import callback_handler

        self._seen = _failure_counts()
        callback_handler.register_end_callback(self._compiled)

    def stop(self) -> None:
        from torch._dynamo.callback import callback_handler

        if self._compiled in callback_handler.end_callbacks:
            callback_handler.remove_end_callback(self._compiled)

    def _compiled(self, args: Any) -> None:
        from torch._dynamo.utils import guard_failures

        for code, failures in list(guard_failures.items()):
            new = failures[self._seen.get(code, 0) :]
            self._seen[code] = len(failures)
            shape = [reason for reason in new if _SHAPE_CHANGE.search(reason)]
            if shape and self.reason is None:
                self.reason = shape[-1].split("\n")[0]


def _failure_counts() -> dict[Any, int]:
    from torch._dynamo.utils import guard_failures

    return {code: len(failures) for code, failures in guard_failures.items()}


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _failure_message(
    name: str, options: Mapping[str, Any], error: BaseException, by_trainer: bool = True
) -> str:
    inner = getattr(error, "inner_exception", None) or error  # what the backend raised
    cause = f"{type(inner).__name__}: {_first_line(inner)}"
    if by_trainer:
        backend = options.get("backend") or "inductor"
        backend = f"with backend {getattr(backend, '__name__', backend)!r}"
        uncompiled, other = "compile=False", "compile={'backend': 'aot_eager'}"
    else:  # the user's torch.compile(module, ...) call chose the backend
        backend = "as torch.compile(module) was asked"
        uncompiled = "the module itself instead of torch.compile(module)"
        other = "torch.compile(module, backend='aot_eager')"
    if "compiler" in cause.lower():
        fix = (
            "install a C++ compiler (gcc or clang, e.g. apt-get install g++) or point the CXX "
            f"environment variable at one; or compile without generating code, {other}, or "
            f"train uncompiled, {uncompiled}"
        )
    else:
        fix = (
            f"train uncompiled with {uncompiled}, or try {other}; "
            "TORCHDYNAMO_VERBOSE=1 shows torch's internal traceback"
        )
    return f"torch.compile failed compiling {name}.forward {backend}: {cause} ({fix})."


def _recompile_message(name: str, reason: str, by_trainer: bool = True) -> str:
    from torch._dynamo import config

    dynamic = "Trainer(compile={'dynamic': True})"
    if not by_trainer:
        dynamic = "torch.compile(module, dynamic=True)"
    return (
        f"torch.compile recompiled {name}.forward because an input's shape changed "
        f"({reason}). Each new shape costs another compilation, and past "
        f"torch._dynamo.config.recompile_limit ({config.recompile_limit}) the forward runs "
        "uncompiled. Give the batches one shape (DataLoader(drop_last=True), or pad the "
        f"last batch), or compile shape-generic code from the start with {dynamic}. "
        "trainkit warns about this once per run."
    )
