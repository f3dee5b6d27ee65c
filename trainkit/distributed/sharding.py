"""Helpers of the FSDP strategy: which modules become shard units, the mixed precision
policy, meta-device materialization, and full (one-file) state dicts.

Everything here is torch's own machinery (``fully_shard``, ``MixedPrecisionPolicy``,
``torch.distributed.checkpoint.state_dict``, ``distribute_tensor``); these functions
only decide what to hand it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
)
from torch.distributed.fsdp import MixedPrecisionPolicy
from torch.distributed.tensor import DTensor, distribute_tensor

#: Containers whose children (not the container) become shard units by default.
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)
#: Gathered one tensor at a time, kept on rank 0's CPU only.
FULL_ON_RANK_ZERO = StateDictOptions(full_state_dict=True, cpu_offload=True)


def mixed_precision_policy(precision: str) -> MixedPrecisionPolicy:
    """The ``MixedPrecisionPolicy`` for ``Trainer(precision=...)``.

    "bf16-mixed" computes in bfloat16 and reduces gradients in float32; any
    other precision but "16-mixed" leaves the dtypes alone. "16-mixed" needs a
    loss scaler over shards, which trainkit's FSDP does not have: it is refused.

    Args:
        precision: the Trainer's canonical precision name.

    Example:
        >>> mixed_precision_policy("bf16-mixed").param_dtype
        torch.bfloat16
    """
    if precision == "bf16-mixed":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if precision == "16-mixed":
        raise ValueError(
            "precision='16-mixed' is not supported with strategy='fsdp' (float16 needs a "
            "loss scaler across shards). Use precision='bf16-mixed' or '32-true'."
        )
    return MixedPrecisionPolicy()


def shard_units(
    module: nn.Module, policy: Collection[type[nn.Module] | str] | None
) -> list[nn.Module]:
    """The submodules of ``module`` that become their own FSDP units (innermost first).

    Args:
        module: the user's module (the root unit, sharded last by the caller).
        policy: None: each direct child that has parameters, where a container
            (Sequential, ModuleList, ModuleDict) gives each of its children
            instead; else a collection of module classes (each outermost module
            of one of them) and of submodule names (each child of that submodule).
    """
    if policy is None:
        return list(_default_units(module))
    classes = tuple(entry for entry in policy if isinstance(entry, type))
    units: list[nn.Module] = []
    for entry in policy:
        if isinstance(entry, str):
            try:
                container = module.get_submodule(entry)
            except AttributeError as error:
                raise ValueError(
                    f"FSDPStrategy(shard_modules=...) names {entry!r}, which is not a "
                    f"submodule of {type(module).__name__}; name an attribute such as "
                    "'layers' (or 'model.layers'), or give module classes."
                ) from error
            units.extend(child for child in container.children() if _has_parameters(child))
    if classes:
        units.extend(_outermost(module, classes))
    if not units:
        raise ValueError(
            f"FSDPStrategy(shard_modules={policy!r}) selects no submodule of "
            f"{type(module).__name__}; give classes or names its submodules have."
        )
    # fully_shard takes a unit inside another first (a name and a class may pick
    # both, e.g. "blocks" and Linear); reversed pre-order puts inner before outer.
    chosen = {id(unit) for unit in units}
    return [sub for sub in reversed(list(module.modules())) if id(sub) in chosen]


def _default_units(module: nn.Module) -> Iterator[nn.Module]:
    for child in module.children():
        if isinstance(child, _CONTAINERS):
            yield from _default_units(child)
        elif _has_parameters(child):
            yield child


def _outermost(module: nn.Module, classes: tuple[type[nn.Module], ...]) -> Iterator[nn.Module]:
    for child in module.children():
        if isinstance(child, classes):
            yield child
        else:
            yield from _outermost(child, classes)


def _has_parameters(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def meta_modules(module: nn.Module) -> list[nn.Module]:
    """The submodules holding a parameter or buffer of their own on the meta device."""
    return [
        sub
        for sub in module.modules()
        if any(t.is_meta for t in (*sub.parameters(False), *sub.buffers(False)))
    ]


def materialize(modules: list[nn.Module], device: torch.device) -> None:
    """Give meta-device modules (already sharded) real memory and initial values.

    Each rank allocates only its shards (``to_empty``) and fills them with the
    module's own ``reset_parameters()``.

    Args:
        modules: from :func:`meta_modules`, taken before sharding.
        device: the rank's device.
    """
    for sub in modules:
        reset = _initializer(sub)
        if reset is None:
            raise ValueError(
                f"{type(sub).__name__} was built on the meta device (in configure_model) but "
                "has no reset_parameters() to initialize it after sharding; define "
                "reset_parameters() on it, or pass FSDPStrategy(meta_init=False)."
            )
        sub.to_empty(device=device, recurse=False)
        with torch.no_grad():
            reset()


def _initializer(module: nn.Module) -> Callable[[], Any] | None:
    # A module's reset_parameters(); for torch's own layers that name it
    # _reset_parameters() (nn.MultiheadAttention, in every nn.Transformer), that one.
    reset = getattr(module, "reset_parameters", None)
    if reset is None and type(module).__module__.startswith("torch.nn."):
        reset = getattr(module, "_reset_parameters", None)
    return reset if callable(reset) else None


def full_model_state(module: nn.Module) -> dict[str, Any]:
    """The module's full state dict on rank 0's CPU (empty on other ranks); collective."""
    return get_model_state_dict(module, options=FULL_ON_RANK_ZERO)


def full_optimizer_state(module: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's full state on rank 0, keyed by parameter index as
    ``optimizer.state_dict()`` keys it on one device (empty on other ranks); collective."""
    state: dict[str, Any] = get_optimizer_state_dict(module, optimizer, options=FULL_ON_RANK_ZERO)
    if not state:
        return {}
    # torch names parameters by their fully qualified names; a one-device file
    # numbers them across the groups in order.
    index = {
        name: position
        for position, name in enumerate(n for g in state["param_groups"] for n in g["params"])
    }
    groups = [{**g, "params": [index[n] for n in g["params"]]} for g in state["param_groups"]]
    return {"state": {index[n]: s for n, s in state["state"].items()}, "param_groups": groups}


def shard_like(value: Any, target: Any) -> Any:
    """``value`` (a full tensor every rank holds) sharded as ``target``, a DTensor.

    Every rank cuts its own shard: no communication.
    """
    if (
        isinstance(target, DTensor)
        and isinstance(value, torch.Tensor)
        and not isinstance(value, DTensor)
        and value.shape == target.shape
    ):
        local = value.to(device=target.device, dtype=target.dtype)
        return distribute_tensor(local, target.device_mesh, target.placements, src_data_rank=None)
    return value


def load_full_model_state(module: nn.Module, state: dict[str, Any], *_: Any) -> None:
    """A ``load_state_dict`` pre-hook: full tensors become shards of the module's DTensors.

    So a one-device checkpoint (or any full state dict) loads into the sharded module.
    """
    own: dict[str, torch.Tensor] = dict(module.named_parameters())
    own.update(module.named_buffers())
    for key, value in list(state.items()):
        if key in own:
            state[key] = shard_like(value, own[key])


def shard_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """A ``load_state_dict`` post-hook: full per-parameter states become shards."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state.get(param)
            if state:
                for key, value in state.items():
                    state[key] = shard_like(value, param)
