"""Lightning's ``DDPStrategy``: trainkit's, built from Lightning's arguments."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

from torch.nn.parallel import DistributedDataParallel

from trainkit.lightning.strategies._ported import _LightningStrategy
from trainkit.strategies.ddp import DDPStrategy as _DDPStrategy

__all__ = ["DDPStrategy"]

#: What trainkit decides itself, and where a user says it instead.
_DECIDED_ELSEWHERE = {
    "accelerator": "Trainer(accelerator=...)",
    "parallel_devices": "Trainer(devices=...)",
    "cluster_environment": "the environment torchrun or SLURM set (trainkit reads it)",
    "checkpoint_io": "ModelCheckpoint and Trainer.save_checkpoint (trainkit's file format)",
    "precision_plugin": "Trainer(precision=...)",
}
# DistributedDataParallel's own keywords (``**kwargs`` of Lightning's DDPStrategy).
#: Those the strategy sets itself; a config tool may pass them as None (their default).
_SET_BY_STRATEGY = ("output_device", "process_group")
_DDP_KEYWORDS = frozenset(inspect.signature(DistributedDataParallel.__init__).parameters) - {
    "self",
    "module",
    "device_ids",
    *_SET_BY_STRATEGY,
}


def refuse_decided_elsewhere(strategy: str, given: dict[str, Any]) -> None:
    """Refuse Lightning arguments that trainkit takes from the Trainer or the environment.

    Args:
        strategy: the class name, for the message.
        given: argument name to value (None: not given).

    Raises:
        TypeError: naming each argument given and where trainkit takes it from.
    """
    passed = [name for name, value in given.items() if value is not None]
    if passed:
        where = "; ".join(f"{name}: {_DECIDED_ELSEWHERE[name]}" for name in passed)
        raise TypeError(
            f"{strategy}({', '.join(f'{name}=...' for name in passed)}): trainkit takes these "
            f"from elsewhere ({where}); drop them from the strategy."
        )


class DDPStrategy(_DDPStrategy, _LightningStrategy, extends=_DDPStrategy):
    """DistributedDataParallel, with Lightning's ``DDPStrategy`` arguments.

    The same strategy as :class:`trainkit.strategies.ddp.DDPStrategy`; the
    devices come from ``Trainer(accelerator=, devices=)``, as with Lightning.
    ``start_method="spawn"`` starts the processes as ``strategy="ddp_spawn"``
    does. What trainkit takes from the Trainer or the environment instead
    (``accelerator``, ``parallel_devices``, ``cluster_environment``,
    ``checkpoint_io``, ``precision_plugin``) is refused with a ``TypeError``
    saying where it goes, as is ``model_averaging_period`` (not provided).

    Args:
        accelerator: refused (``Trainer(accelerator=...)``).
        parallel_devices: refused (``Trainer(devices=...)``).
        cluster_environment: refused (torchrun's or SLURM's variables are read).
        checkpoint_io: refused (trainkit's checkpoint files).
        precision_plugin: refused (``Trainer(precision=...)``).
        ddp_comm_state: the communication hook's state.
        ddp_comm_hook: a DDP communication hook, registered on the wrapped model.
        ddp_comm_wrapper: wraps ``ddp_comm_hook`` (e.g. ``fp16_compress_wrapper``).
        model_averaging_period: refused (periodic model averaging is not provided).
        process_group_backend: "gloo", "nccl", ...; None: NCCL on CUDA, gloo on the CPU.
        timeout: how long a collective may wait for the other processes.
        start_method: "popen" (the script runs again for each process) or
            "spawn"; "fork" and "forkserver" are refused.
        **kwargs: ``DistributedDataParallel`` options (``find_unused_parameters``,
            ``static_graph``, ``gradient_as_bucket_view``, ``bucket_cap_mb``,
            ``broadcast_buffers``, ...).

    Raises:
        TypeError: an argument above that is refused, or a keyword DDP does not take.
        ValueError: a start method other than "popen" or "spawn".
    """

    def __init__(
        self,
        accelerator: Any = None,
        parallel_devices: list[Any] | None = None,
        cluster_environment: Any = None,
        checkpoint_io: Any = None,
        precision_plugin: Any = None,
        ddp_comm_state: object | None = None,
        ddp_comm_hook: Callable[..., Any] | None = None,
        ddp_comm_wrapper: Callable[..., Any] | None = None,
        model_averaging_period: int | None = None,
        process_group_backend: str | None = None,
        timeout: timedelta | None = timedelta(minutes=30),
        start_method: Literal["popen", "spawn", "fork", "forkserver"] = "popen",
        **kwargs: Any,
    ) -> None:
        refuse_decided_elsewhere(
            "DDPStrategy",
            {
                "accelerator": accelerator,
                "parallel_devices": parallel_devices,
                "cluster_environment": cluster_environment,
                "checkpoint_io": checkpoint_io,
                "precision_plugin": precision_plugin,
            },
        )
        if model_averaging_period is not None:
            raise TypeError(
                "DDPStrategy(model_averaging_period=...): periodic model averaging (post-local "
                "SGD) is not provided by trainkit; drop it to average gradients every step."
            )
        if start_method not in ("popen", "spawn"):
            raise ValueError(
                f"DDPStrategy(start_method={start_method!r}): trainkit starts processes by "
                "running the script again ('popen', the default) or with 'spawn'; pass one "
                "of these."
            )
        for name in _SET_BY_STRATEGY:  # LightningCLI gives every argument, these as None
            if name in kwargs and kwargs[name] is None:
                del kwargs[name]
        unknown = sorted(set(kwargs) - _DDP_KEYWORDS)
        if unknown:
            raise TypeError(
                f"DDPStrategy got {', '.join(unknown)}, which DistributedDataParallel does not "
                f"take; its options are {', '.join(sorted(_DDP_KEYWORDS))}."
            )
        if ddp_comm_wrapper is not None and ddp_comm_hook is not None:
            ddp_comm_hook = ddp_comm_wrapper(ddp_comm_hook)
        super().__init__(
            None,
            timeout=timeout if timeout is not None else timedelta(minutes=30),
            process_group_backend=process_group_backend,
            ddp_comm_hook=ddp_comm_hook,
            ddp_comm_state=ddp_comm_state,
        )
        defaults = self.ddp_options
        # Assigned as given, so that jsonargparse (LightningCLI) follows kwargs to the
        # DistributedDataParallel(**self.ddp_options) call and lists its arguments as
        # DDPStrategy's, as it lists them for Lightning's.
        self.ddp_options = kwargs
        for name, value in defaults.items():
            self.ddp_options.setdefault(name, value)
        if start_method == "spawn":
            self.name = "ddp_spawn"  # how the launcher starts the processes
