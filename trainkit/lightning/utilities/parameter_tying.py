"""Lightning's ``lightning.pytorch.utilities.parameter_tying`` names, served by trainkit.

Tied parameters are one ``nn.Parameter`` object registered under several names
(a language model's input embedding and output projection, say).
:func:`find_shared_parameters` lists those names; :func:`set_shared_parameters`
ties them again after something replaced the parameters by separate objects, as
``load_state_dict(..., assign=True)`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from torch import nn

__all__ = ["find_shared_parameters", "set_shared_parameters"]

ModuleT = TypeVar("ModuleT", bound=nn.Module)


def find_shared_parameters(module: nn.Module) -> list[list[str]]:
    """The names of ``module``'s parameters that are one and the same tensor, by tensor.

    A submodule registered under two names counts too: its parameters appear under
    both paths.

    Args:
        module: the module to look through (with its submodules).

    Returns:
        One list of names per shared parameter, in ``named_parameters`` order; names
        of a parameter held once are not listed (an untied module gives ``[]``).

    Example:
        >>> from torch import nn
        >>> class TiedLM(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.embed = nn.Embedding(10, 4)
        ...         self.head = nn.Linear(4, 10, bias=False)
        ...         self.head.weight = self.embed.weight
        >>> find_shared_parameters(TiedLM())
        [['embed.weight', 'head.weight']]
        >>> find_shared_parameters(nn.Linear(4, 2))
        []
    """
    names_by_parameter: dict[int, list[str]] = {}
    # remove_duplicate=False: every name a parameter is reachable by, not only its first.
    for name, parameter in module.named_parameters(remove_duplicate=False):
        names_by_parameter.setdefault(id(parameter), []).append(name)
    return [names for names in names_by_parameter.values() if len(names) > 1]


def set_shared_parameters(module: ModuleT, shared_params: Iterable[Sequence[str]]) -> ModuleT:
    """Tie ``module``'s parameters again: in each list, every name gets the first one's.

    Args:
        module: the module whose parameters to tie (changed in place).
        shared_params: lists of parameter names, as :func:`find_shared_parameters`
            returned them for this module, or for one built the same way, before the
            ties were lost.

    Returns:
        ``module`` itself.

    Raises:
        AttributeError: a name is not a parameter of ``module``.

    Example:
        >>> from torch import nn
        >>> class TiedLM(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.embed = nn.Embedding(10, 4)
        ...         self.head = nn.Linear(4, 10, bias=False)
        ...         self.head.weight = self.embed.weight
        >>> model = TiedLM()
        >>> shared = find_shared_parameters(model)
        >>> model.load_state_dict(TiedLM().state_dict(), assign=True)  # new objects: untied
        <All keys matched successfully>
        >>> model.head.weight is model.embed.weight
        False
        >>> model = set_shared_parameters(model, shared)
        >>> model.head.weight is model.embed.weight
        True
    """
    groups = [list(names) for names in shared_params if names]
    # Check every name of every list first, so a wrong name changes nothing.
    checked = [[_parameter(module, name) for name in names] for names in groups]
    for names, parameters in zip(groups, checked, strict=True):
        source = parameters[0]
        for name in names[1:]:
            owner_path, _, attribute = name.rpartition(".")
            setattr(module.get_submodule(owner_path), attribute, source)
    return module


def _parameter(module: nn.Module, name: str) -> nn.Parameter:
    try:
        return module.get_parameter(name)
    except AttributeError as error:
        raise AttributeError(
            f"set_shared_parameters: {type(module).__name__} has no parameter {name!r} "
            f"({error}). Pass the names find_shared_parameters() gave for this module, or "
            "for one built the same way."
        ) from error
