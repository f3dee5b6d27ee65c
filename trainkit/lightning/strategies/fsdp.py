"""Lightning's ``FSDPStrategy``: trainkit's FSDP2 strategy, built from Lightning's arguments."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import timedelta
from typing import Any, Literal

from torch import nn

from trainkit.lightning.strategies._ported import _LightningStrategy
from trainkit.lightning.strategies.ddp import refuse_decided_elsewhere
from trainkit.strategies.fsdp import FSDPStrategy as _FSDPStrategy

__all__ = ["FSDPStrategy"]

# Lightning's sharding strategies, as (resharded after forward, hybrid).
_SHARDING = {
    "FULL_SHARD": (True, False),
    "SHARD_GRAD_OP": (False, False),
    "HYBRID_SHARD": (True, True),
    "_HYBRID_SHARD_ZERO2": (False, True),
}
ModulePolicy = Collection[type[nn.Module]] | type[nn.Module] | Callable[..., Any]


def module_classes(argument: str, policy: ModulePolicy | None) -> tuple[type[nn.Module], ...]:
    """The module classes a Lightning wrap or checkpointing policy names.

    Args:
        argument: the argument's name, for the message.
        policy: a module class, a collection of them, or torch's ``ModuleWrapPolicy``.

    Raises:
        TypeError: a policy function (trainkit takes module classes).
    """
    if policy is None:
        return ()
    if isinstance(policy, type) and issubclass(policy, nn.Module):
        return (policy,)
    classes = getattr(policy, "_module_classes", policy)  # torch's ModuleWrapPolicy keeps them
    if isinstance(classes, Collection) and all(
        isinstance(item, type) and issubclass(item, nn.Module) for item in classes
    ):
        return tuple(classes)
    raise TypeError(
        f"FSDPStrategy({argument}={policy!r}): trainkit takes the module classes to apply "
        f"it to, e.g. {argument}={{Block}}, not a policy function."
    )


class FSDPStrategy(_FSDPStrategy, _LightningStrategy, extends=_FSDPStrategy):
    """Fully sharded data parallel (FSDP2), with Lightning's ``FSDPStrategy`` arguments.

    The same strategy as :class:`trainkit.strategies.fsdp.FSDPStrategy`:
    ``auto_wrap_policy`` (module classes, or torch's ``ModuleWrapPolicy``) names
    the shard units, ``activation_checkpointing_policy`` (or the older
    ``activation_checkpointing``) the modules whose activations are recomputed,
    ``sharding_strategy`` whether parameters are freed after forward
    ("FULL_SHARD") or kept ("SHARD_GRAD_OP"), and "HYBRID_SHARD" with
    ``device_mesh=(replicate, shard)`` shards within groups. Precision comes
    from ``Trainer(precision=...)``. ``state_dict_type`` defaults to "sharded"
    here too, where Lightning's default is "full" (docs/porting.md).

    Args:
        accelerator: refused (``Trainer(accelerator=...)``).
        parallel_devices: refused (``Trainer(devices=...)``).
        cluster_environment: refused (torchrun's or SLURM's variables are read).
        checkpoint_io: refused (trainkit's checkpoint files).
        precision_plugin: refused (``Trainer(precision=...)``).
        process_group_backend: "gloo", "nccl", ...; None: NCCL on CUDA, gloo on the CPU.
        timeout: how long a collective may wait for the other processes.
        cpu_offload: keep shards, gradients and optimizer state on the CPU (a bool,
            or torch's ``CPUOffload``: its ``offload_params``).
        mixed_precision: refused (``Trainer(precision="bf16-mixed")``).
        auto_wrap_policy: the module classes that become shard units.
        activation_checkpointing: module classes to recompute (Lightning's older name).
        activation_checkpointing_policy: module classes to recompute in backward.
        sharding_strategy: "FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD" or
            "_HYBRID_SHARD_ZERO2" (or torch's ``ShardingStrategy``); "NO_SHARD" is
            refused (use DDPStrategy).
        state_dict_type: "sharded" (a folder of shards) or "full" (one file).
        device_mesh: ``(replicate, shard)`` for the hybrid strategies.
        **kwargs: ``use_orig_params=True`` only (FSDP2 always trains the original
            parameters); other FSDP1 options are refused.

    Raises:
        TypeError: a refused argument, a policy function, or an FSDP1 option.
        ValueError: a sharding strategy trainkit does not provide, or a hybrid one
            without ``device_mesh``.
    """

    def __init__(
        self,
        accelerator: Any = None,
        parallel_devices: list[Any] | None = None,
        cluster_environment: Any = None,
        checkpoint_io: Any = None,
        precision_plugin: Any = None,
        process_group_backend: str | None = None,
        timeout: timedelta | None = timedelta(minutes=30),
        cpu_offload: Any = None,
        mixed_precision: Any = None,
        auto_wrap_policy: ModulePolicy | None = None,
        activation_checkpointing: type[nn.Module] | list[type[nn.Module]] | None = None,
        activation_checkpointing_policy: ModulePolicy | None = None,
        sharding_strategy: Any = "FULL_SHARD",
        state_dict_type: Literal["full", "sharded"] = "sharded",
        device_mesh: tuple[int, int] | None = None,
        **kwargs: Any,
    ) -> None:
        refuse_decided_elsewhere(
            "FSDPStrategy",
            {
                "accelerator": accelerator,
                "parallel_devices": parallel_devices,
                "cluster_environment": cluster_environment,
                "checkpoint_io": checkpoint_io,
                "precision_plugin": precision_plugin,
            },
        )
        if mixed_precision is not None:
            raise TypeError(
                "FSDPStrategy(mixed_precision=...): trainkit takes the precision from "
                'Trainer(precision="bf16-mixed") (bfloat16 compute, float32 gradient '
                "reduction); drop mixed_precision."
            )
        if kwargs.pop("use_orig_params", True) is not True or kwargs:
            raise TypeError(
                f"FSDPStrategy got {', '.join(sorted(kwargs) or ['use_orig_params=False'])}: "
                "FSDP1 options that trainkit's FSDP2 strategy does not take; drop them."
            )
        name = getattr(sharding_strategy, "name", sharding_strategy)
        if name not in _SHARDING:
            raise ValueError(
                f"FSDPStrategy(sharding_strategy={sharding_strategy!r}) is not provided; "
                f"pass one of {', '.join(_SHARDING)}"
                + (" (for no sharding, use DDPStrategy)." if name == "NO_SHARD" else ".")
            )
        reshard, hybrid = _SHARDING[name]
        if hybrid and device_mesh is None:
            raise ValueError(
                f"FSDPStrategy(sharding_strategy={name!r}) needs device_mesh=(replicate, "
                "shard), e.g. device_mesh=(2, 4) for two groups of four processes."
            )
        if device_mesh is not None and not isinstance(device_mesh, tuple):
            raise TypeError(
                "FSDPStrategy(device_mesh=...) takes (replicate, shard); trainkit builds the "
                "mesh itself."
            )
        if device_mesh is not None and not hybrid:
            raise ValueError(
                f"FSDPStrategy(device_mesh={device_mesh!r}) is for the hybrid sharding "
                'strategies: add sharding_strategy="HYBRID_SHARD", or drop device_mesh.'
            )
        recomputed = module_classes(
            "activation_checkpointing_policy", activation_checkpointing_policy
        ) or module_classes("activation_checkpointing", activation_checkpointing)
        super().__init__(
            None,
            shard_modules=module_classes("auto_wrap_policy", auto_wrap_policy) or None,
            reshard_after_forward=reshard,
            cpu_offload=bool(getattr(cpu_offload, "offload_params", cpu_offload)),
            activation_checkpointing=recomputed,
            hsdp=device_mesh,
            state_dict_type=state_dict_type,
            timeout=timeout if timeout is not None else timedelta(minutes=30),
            process_group_backend=process_group_backend,
        )
