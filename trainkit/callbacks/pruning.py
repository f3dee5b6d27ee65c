"""ModelPruning: prune weights during training with ``torch.nn.utils.prune``.

As Lightning's: pruning runs at each training epoch's end (or validation's,
with ``prune_on_train_epoch_end=False``); ``amount``, ``apply_pruning`` and
``use_lottery_ticket_hypothesis`` may be functions of the epoch; the lottery
ticket resets the weights that survive to their values when training started
(or to freshly drawn ones, with ``resample_parameters``). With
``make_pruning_permanent`` the masks are folded into the weights when training
ends, and every checkpoint holds the pruned weights under their plain names
(``net.0.weight``, not ``weight_orig`` and ``weight_mask``), so it loads into
an unpruned model.

While training, a pruned parameter is torch's reparametrisation: ``weight_orig``
(the same Parameter object the optimizer holds) times the ``weight_mask``
buffer. A resumed run starts without masks (the checkpoint holds the masked
weights, whose zeros stay zero only until trained): pruning is not an exact
resume point, in trainkit as in Lightning.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from copy import deepcopy
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.utils import prune

from trainkit.callbacks.base import Callback
from trainkit.core.module import Module

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer

log = logging.getLogger(__name__)

_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "ln_structured": prune.ln_structured,
    "l1_unstructured": prune.l1_unstructured,
    "random_structured": prune.random_structured,
    "random_unstructured": prune.random_unstructured,
}
_METHODS: dict[str, type[prune.BasePruningMethod]] = {
    "ln_structured": prune.LnStructured,
    "l1_unstructured": prune.L1Unstructured,
    "random_structured": prune.RandomStructured,
    "random_unstructured": prune.RandomUnstructured,
}
#: Containers are not pruned themselves; the layers inside them are.
_CONTAINERS = (Module, nn.Sequential, nn.ModuleList, nn.ModuleDict)

ParameterList = Sequence[tuple[nn.Module, str]]


def _is_method(value: Any) -> bool:
    return inspect.isclass(value) and issubclass(value, prune.BasePruningMethod)


def _at(value: Any, epoch: int) -> Any:
    """``value(epoch)`` for a callable, else ``value``."""
    return value(epoch) if callable(value) else value


class ModelPruning(Callback):
    """Prune the model's parameters during training (``torch.nn.utils.prune``).

    Args:
        pruning_fn: "l1_unstructured", "random_unstructured", "ln_structured",
            "random_structured", or a ``torch.nn.utils.prune.BasePruningMethod``
            subclass (the class, not an instance).
        parameters_to_prune: ``(module, "weight")`` pairs; None or empty: every
            ``parameter_names`` parameter of every layer of the model.
        parameter_names: which parameters of each layer, "weight" and/or "bias"
            (default both); used when ``parameters_to_prune`` is not given.
        use_global_unstructured: prune across all the parameters together (the
            ``amount`` smallest of them all), not each one by itself.
        amount: a fraction (float in [0, 1]) or a count (int) of parameters to
            prune, or a function of the epoch returning one (0 skips the epoch).
        apply_pruning: whether to prune, or a function of the epoch deciding it.
        make_pruning_permanent: fold the masks into the weights when training
            ends, and save pruned weights under their plain names in checkpoints.
        use_lottery_ticket_hypothesis: after pruning, reset the remaining weights
            to their values when training started (https://arxiv.org/abs/1803.03635);
            a bool or a function of the epoch.
        resample_parameters: with the lottery ticket, draw new initial values
            (the layer's ``reset_parameters``) instead of the original ones.
        pruning_dim: the dimension structured pruning removes slices along.
        pruning_norm: the norm ``ln_structured`` ranks slices by.
        verbose: 0 silent; 1 logs the overall sparsity after pruning; 2 also each
            parameter's (Python ``logging``, logger ``trainkit.callbacks.pruning``).
        prune_on_train_epoch_end: prune at the training epoch's end; False prunes
            at the validation epoch's end instead.

    Raises:
        ValueError: an unknown pruning function or parameter name, structured
            pruning without ``pruning_dim`` (or ``ln_structured`` without
            ``pruning_norm``), a non-unstructured method with
            ``use_global_unstructured``, an ``amount`` that is not a number or a
            function, or ``verbose`` not 0, 1 or 2.

    Example:
        >>> pruning = ModelPruning("l1_unstructured", amount=lambda epoch: 0.2 if epoch < 3 else 0)
    """

    PARAMETER_NAMES = ("weight", "bias")

    def __init__(
        self,
        pruning_fn: Callable[..., Any] | str,
        parameters_to_prune: ParameterList | None = None,
        parameter_names: list[str] | None = None,
        use_global_unstructured: bool = True,
        amount: int | float | Callable[[int], int | float] = 0.5,
        apply_pruning: bool | Callable[[int], bool] = True,
        make_pruning_permanent: bool = True,
        use_lottery_ticket_hypothesis: bool | Callable[[int], bool] = True,
        resample_parameters: bool = False,
        pruning_dim: int | None = None,
        pruning_norm: int | None = None,
        verbose: int = 0,
        prune_on_train_epoch_end: bool = True,
    ) -> None:
        self._use_global_unstructured = use_global_unstructured
        self._parameters_to_prune: ParameterList = list(parameters_to_prune or ())
        self._parameter_names = tuple(parameter_names or self.PARAMETER_NAMES)
        for name in self._parameter_names:
            if name not in self.PARAMETER_NAMES:
                raise ValueError(
                    f"ModelPruning(parameter_names=...): {name!r} is not one of "
                    f"{self.PARAMETER_NAMES}."
                )
        self._global_kwargs: dict[str, Any] = {}
        self._method_name: str | None = None
        if isinstance(pruning_fn, str):
            pruning_fn = self._resolve(pruning_fn.lower(), pruning_dim, pruning_norm)
        elif _is_method(pruning_fn):
            if not use_global_unstructured:
                raise ValueError(
                    "ModelPruning: a torch BasePruningMethod subclass as pruning_fn works only "
                    "with use_global_unstructured=True; pass a name ('l1_unstructured', ...) "
                    "to prune each parameter by itself."
                )
            self._method_name = pruning_fn.__name__
        else:
            raise ValueError(
                f"ModelPruning(pruning_fn={pruning_fn!r}): expected one of {list(_FUNCTIONS)} "
                "or a torch.nn.utils.prune.BasePruningMethod subclass (the class, not an instance)."
            )
        if use_global_unstructured and getattr(pruning_fn, "PRUNING_TYPE", None) != "unstructured":
            raise ValueError(
                "ModelPruning(use_global_unstructured=True) needs an unstructured pruning "
                f"method; {self._method_name} is "
                f"{getattr(pruning_fn, 'PRUNING_TYPE', 'not one')}. Pass "
                "use_global_unstructured=False for structured pruning."
            )
        self.pruning_fn = pruning_fn
        if isinstance(amount, bool) or (
            not isinstance(amount, (int, float)) and not callable(amount)
        ):
            raise ValueError(
                f"ModelPruning(amount={amount!r}): pass a fraction (float), a count (int), or "
                "a function of the epoch returning one."
            )
        self.amount = amount
        if verbose not in (0, 1, 2):
            raise ValueError(f"ModelPruning(verbose={verbose!r}): use 0, 1 or 2.")
        self._verbose = verbose
        self._apply_pruning = apply_pruning
        self._make_pruning_permanent = make_pruning_permanent
        self._use_lottery_ticket_hypothesis = use_lottery_ticket_hypothesis
        self._resample_parameters = resample_parameters
        self._prune_on_train_epoch_end = prune_on_train_epoch_end
        # id(layer) -> (a copy of the layer as training started, [(index, name), ...]).
        self._original_layers: dict[int, tuple[nn.Module, list[tuple[int, str]]]] | None = None

    def _resolve(self, name: str, dim: int | None, norm: int | None) -> Callable[..., Any]:
        if name not in _FUNCTIONS:
            raise ValueError(
                f"ModelPruning(pruning_fn={name!r}) is not one of torch's built-in pruning "
                f"functions: {list(_FUNCTIONS)}."
            )
        kwargs: dict[str, Any] = {}
        if name.endswith("_structured"):
            if dim is None:
                raise ValueError(
                    f"ModelPruning(pruning_fn={name!r}): structured pruning needs pruning_dim "
                    "(the dimension whose slices are removed, e.g. 0 for output channels)."
                )
            if name == "ln_structured":
                if norm is None:
                    raise ValueError(
                        "ModelPruning(pruning_fn='ln_structured') needs pruning_norm (e.g. 1 or 2)."
                    )
                kwargs["n"] = norm
            kwargs["dim"] = dim
        if self._use_global_unstructured:
            method = _METHODS[name]
            self._method_name = method.__name__
            self._global_kwargs = kwargs
            return method
        function = _FUNCTIONS[name]
        self._method_name = function.__name__
        return partial(function, **kwargs)

    # ------------------------------------------------------------- extension points
    def filter_parameters_to_prune(self, parameters_to_prune: ParameterList = ()) -> ParameterList:
        """Override to choose which of the ``(module, name)`` pairs are pruned.

        Args:
            parameters_to_prune: the pairs found (or given).
        """
        return parameters_to_prune

    @staticmethod
    def sanitize_parameters_to_prune(
        module: nn.Module,
        parameters_to_prune: ParameterList = (),
        parameter_names: Sequence[str] = (),
    ) -> ParameterList:
        """The pairs to prune: every layer's ``parameter_names`` when none are given.

        Args:
            module: the model.
            parameters_to_prune: ``(layer, name)`` pairs, or empty for all.
            parameter_names: the parameter names to take from each layer.

        Raises:
            ValueError: a pair is malformed, or names a layer or parameter the model lacks.
        """
        names = parameter_names or ModelPruning.PARAMETER_NAMES
        layers = [m for m in module.modules() if not isinstance(m, _CONTAINERS)]
        if not parameters_to_prune:
            return [
                (layer, name)
                for name in names
                for layer in layers
                if isinstance(getattr(layer, name, None), nn.Parameter)
            ]
        if not all(
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and isinstance(pair[0], nn.Module)
            and isinstance(pair[1], str)
            for pair in parameters_to_prune
        ):
            raise ValueError(
                "ModelPruning(parameters_to_prune=...) takes a list of (nn.Module, "
                "parameter_name) pairs, or None for every layer."
            )
        known = {id(layer) for layer in layers}
        missing_layers = [type(m).__name__ for m, _ in parameters_to_prune if id(m) not in known]
        missing_names = [n for m, n in parameters_to_prune if id(m) in known and not hasattr(m, n)]
        if missing_layers or missing_names:
            raise ValueError(
                "ModelPruning: some parameters_to_prune are not in the model: layers "
                f"{missing_layers}, parameters {missing_names}. Pass layers of the Module "
                "being trained."
            )
        return list(parameters_to_prune)

    # ------------------------------------------------------------------ pruning
    def apply_pruning(self, amount: int | float) -> None:
        """Prune ``amount`` of ``parameters_to_prune`` (globally or each by itself).

        Args:
            amount: a fraction or a count of parameters.
        """
        before = self._stats() if self._verbose else []
        if self._use_global_unstructured:
            kwargs = {**self._global_kwargs, "amount": amount}
            accepted = set(inspect.signature(self.pruning_fn).parameters) - {"self"}
            prune.global_unstructured(
                self._parameters_to_prune,
                pruning_method=self.pruning_fn,
                **{k: v for k, v in kwargs.items() if k in accepted},
            )
        else:
            for layer, name in self._parameters_to_prune:
                self.pruning_fn(layer, name=name, amount=amount)
        if self._verbose:
            self._log_sparsity(before, self._stats(), amount)

    def apply_lottery_ticket_hypothesis(self) -> None:
        """Reset the remaining weights to their values when training started (or new ones)."""
        if self._original_layers is None:
            return
        for original, names in self._original_layers.values():
            source = original
            if self._resample_parameters and callable(getattr(original, "reset_parameters", None)):
                source = deepcopy(original)
                source.reset_parameters()  # type: ignore[operator]
            for index, name in names:
                layer = self._parameters_to_prune[index][0]
                # A pruned parameter's values live in "<name>_orig" (times the mask).
                target = getattr(layer, name + "_orig", None)
                if target is None:
                    target = getattr(layer, name)
                value = getattr(source, name)
                if isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor):
                    with torch.no_grad():
                        target.copy_(value.to(target.device))

    def make_pruning_permanent(self, module: nn.Module) -> None:
        """Fold every pruning mask into its weight and remove the reparametrisation.

        Args:
            module: the model.
        """
        for layer in module.modules():
            for key, hook in list(layer._forward_pre_hooks.items()):
                if isinstance(hook, prune.BasePruningMethod):
                    hook.remove(layer)
                    del layer._forward_pre_hooks[key]

    def _run(self, epoch: int) -> None:
        amount = _at(self.amount, epoch)
        if not _at(self._apply_pruning, epoch) or not amount:
            return
        self.apply_pruning(amount)
        if _at(self._use_lottery_ticket_hypothesis, epoch):
            self.apply_lottery_ticket_hypothesis()

    def _stats(self) -> list[tuple[int, int]]:
        stats = []
        for layer, name in self._parameters_to_prune:
            mask = getattr(layer, name + "_mask", None)
            stats.append((0, 1) if mask is None else (int((mask == 0).sum()), mask.numel()))
        return stats

    def _log_sparsity(
        self, before: list[tuple[int, int]], after: list[tuple[int, int]], amount: float
    ) -> None:
        total = sum(size for _, size in after)
        zeros_before = sum(zeros for zeros, _ in before)
        zeros_after = sum(zeros for zeros, _ in after)
        log.info(
            f"Applied `{self._method_name}`. Pruned: {zeros_before}/{total} "
            f"({zeros_before / total:.2%}) -> {zeros_after}/{total} ({zeros_after / total:.2%})"
        )
        if self._verbose == 2:
            for (layer, name), (was, size_was), (now, size) in zip(
                self._parameters_to_prune, before, after, strict=True
            ):
                log.info(
                    f"Applied `{self._method_name}` to `{layer!r}.{name}` with amount={amount}. "
                    f"Pruned: {was} ({was / size_was:.2%}) -> {now} ({now / size:.2%})"
                )

    # -------------------------------------------------------------------- hooks
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Find the parameters to prune; with the lottery ticket, keep their initial values."""
        super().setup(trainer, module, stage)
        found = self.sanitize_parameters_to_prune(
            module, self._parameters_to_prune, self._parameter_names
        )
        self._parameters_to_prune = self.filter_parameters_to_prune(found)
        if self._use_lottery_ticket_hypothesis:
            self._original_layers = {}
            for index, (layer, name) in enumerate(self._parameters_to_prune):
                entry = self._original_layers.setdefault(id(layer), (deepcopy(layer), []))
                entry[1].append((index, name))

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Prune, unless pruning happens at the validation epoch's end."""
        if self._prune_on_train_epoch_end:
            self._run(module.current_epoch)

    def on_validation_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """With ``prune_on_train_epoch_end=False``: prune (not in the sanity check)."""
        if not trainer.sanity_checking and not self._prune_on_train_epoch_end:
            self._run(module.current_epoch)

    def on_train_end(self, trainer: Trainer, module: Module) -> None:
        """Fold the masks into the weights, with ``make_pruning_permanent``."""
        if self._make_pruning_permanent:
            self.make_pruning_permanent(module)

    def on_save_checkpoint(
        self, trainer: Trainer, module: Module, checkpoint: dict[str, Any]
    ) -> None:
        """Save the pruned weights under their plain names; training keeps its masks."""
        if not self._make_pruning_permanent:
            return
        state = dict(checkpoint["state_dict"])
        for key in [k for k in state if k.endswith("_mask")]:
            base = key[: -len("_mask")]
            mask, original = state.pop(key), state.pop(base + "_orig")
            state[base] = mask.to(dtype=original.dtype) * original
        checkpoint["state_dict"] = {key: value.cpu() for key, value in state.items()}
