"""Several iterables read as one: a list, tuple or dict of dataloaders, under a sampling mode.

``Trainer.fit`` combines a collection of training loaders (``[dl_a, dl_b]`` or
``{"a": dl_a, "b": dl_b}``) in ``"max_size_cycle"`` mode, so each training batch has
the collection's shape (``[batch_a, batch_b]``, ``{"a": batch_a, "b": batch_b}``);
validation, test and prediction read several loaders one after the other
(``"sequential"``), each batch with its ``dataloader_idx``. Passing a
:class:`CombinedLoader` chooses another mode.

Iterating a ``CombinedLoader`` yields ``(batch, batch_idx, dataloader_idx)``, with
``dataloader_idx`` 0 in every mode but ``"sequential"``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

__all__ = [
    "MODES",
    "CombinedBatches",
    "CombinedLoader",
    "as_given",
    "flatten",
    "is_loader_collection",
    "training_iterable",
]

Mode = Literal["min_size", "max_size_cycle", "max_size", "sequential"]
MODES: tuple[str, ...] = ("min_size", "max_size_cycle", "max_size", "sequential")


def flatten(tree: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """The leaves of nested lists, tuples and dicts, and a function that rebuilds the shape.

    Example:
        >>> leaves, rebuild = flatten({"a": [1, 2], "b": 3})
        >>> leaves, rebuild(["x", "y", "z"])
        ([1, 2, 3], {'a': ['x', 'y'], 'b': 'z'})
    """
    leaves: list[Any] = []

    def walk(node: Any) -> Callable[[Iterator[Any]], Any]:
        if isinstance(node, Mapping):
            keys, parts = list(node), [walk(value) for value in node.values()]
            return lambda values: {key: part(values) for key, part in zip(keys, parts, strict=True)}
        if isinstance(node, (list, tuple)):
            parts = [walk(value) for value in node]
            kind = list if isinstance(node, list) else tuple
            return lambda values: kind(part(values) for part in parts)
        leaves.append(node)
        return lambda values: next(values)

    build = walk(tree)
    return leaves, lambda values: build(iter(values))


def is_loader_collection(value: Any) -> bool:
    """Whether ``value`` is a list, tuple or dict (nested or not) of dataloaders only,
    or a dict of any iterables (an iterable of your own, a ``StatefulDataLoader``).

    A list of batches (tensors, tuples of tensors) is not: trainkit reads it as one
    loader whose items are the batches.
    """
    from torch.utils.data import DataLoader

    if not isinstance(value, (list, tuple, Mapping)):
        return False
    leaves, _ = flatten(value)
    if isinstance(value, Mapping):  # never batches: any iterables in a dict are combined
        return bool(leaves) and all(_iterable_loader(leaf) for leaf in leaves)
    return bool(leaves) and all(isinstance(leaf, (DataLoader, CombinedLoader)) for leaf in leaves)


def _iterable_loader(leaf: Any) -> bool:
    import torch

    return isinstance(leaf, Iterable) and not isinstance(leaf, (torch.Tensor, str, bytes))


class CombinedLoader(Iterable[tuple[Any, int, int]]):
    """Reads several iterables as one, under a sampling mode.

    Args:
        iterables: an iterable, or a list, tuple or dict (nested or not) of them.
        mode: how the iterables are read together:

            - ``"min_size"``: a batch from each, until the shortest ends;
            - ``"max_size_cycle"``: a batch from each, until the longest ends; the
              shorter ones start again when they end;
            - ``"max_size"``: a batch from each, until the longest ends; one that
              has ended gives ``None``;
            - ``"sequential"``: each iterable whole, one after the other; the batch
              is that iterable's own and ``dataloader_idx`` says which it is.

    Example:
        >>> from torch.utils.data import DataLoader
        >>> a, b = DataLoader(range(6), batch_size=4), DataLoader(range(15), batch_size=5)
        >>> combined = CombinedLoader({"a": a, "b": b}, "max_size_cycle")
        >>> len(combined)
        3
        >>> for batch, batch_idx, dataloader_idx in combined:
        ...     print(batch["a"].tolist(), batch["b"].tolist(), batch_idx, dataloader_idx)
        [0, 1, 2, 3] [0, 1, 2, 3, 4] 0 0
        [4, 5] [5, 6, 7, 8, 9] 1 0
        [0, 1, 2, 3] [10, 11, 12, 13, 14] 2 0
    """

    def __init__(self, iterables: Any, mode: Mode = "min_size") -> None:
        if mode not in MODES:
            raise ValueError(  # Lightning's words
                f"Unsupported mode {mode!r}, please select one of: {list(MODES)}."
            )
        self._iterables = iterables
        self._mode: Mode = mode
        self._leaves, self._rebuild = flatten(iterables)

    @property
    def iterables(self) -> Any:
        """The iterables, in the shape they were given."""
        return self._iterables

    @property
    def mode(self) -> Mode:
        """The sampling mode."""
        return self._mode

    @property
    def flattened(self) -> list[Any]:
        """The iterables as a flat list (a dict's in its order)."""
        return list(self._leaves)

    @flattened.setter
    def flattened(self, iterables: list[Any]) -> None:
        """Replace the iterables one for one, keeping the shape (e.g. with prepared loaders)."""
        if len(iterables) != len(self._leaves):
            raise ValueError(
                f"CombinedLoader holds {len(self._leaves)} iterables; {len(iterables)} were "
                "given to replace them. Give one for each."
            )
        self._iterables = self._rebuild(list(iterables))
        self._leaves, self._rebuild = flatten(self._iterables)

    @property
    def sampler(self) -> Any:
        """Each iterable's ``sampler`` (None where it has none), in the iterables' shape."""
        return self._rebuild([getattr(leaf, "sampler", None) for leaf in self._leaves])

    @property
    def batch_sampler(self) -> Any:
        """Each iterable's ``batch_sampler`` (None where it has none), in the iterables' shape."""
        return self._rebuild([getattr(leaf, "batch_sampler", None) for leaf in self._leaves])

    def reset(self) -> None:
        """Nothing to forget: each iteration starts the iterables afresh."""

    def __len__(self) -> int:
        lengths = []
        for leaf in self._leaves:
            try:
                lengths.append(len(leaf))
            except TypeError:
                raise TypeError(
                    f"CombinedLoader has no length: its {type(leaf).__name__} has none."
                ) from None
        if not lengths:
            return 0
        if self._mode == "min_size":
            return min(lengths)
        if self._mode == "sequential":
            return sum(lengths)
        if self._mode == "max_size_cycle" and min(lengths) == 0:
            return 0  # an empty iterable has nothing to cycle through
        return max(lengths)

    def __iter__(self) -> Iterator[tuple[Any, int, int]]:
        if self._mode == "sequential":
            return self._sequential()
        return ((batch, index, 0) for index, batch in enumerate(self.batches()))

    def batches(self) -> Iterator[Any]:
        """The combined batches alone (not ``"sequential"``, whose batches are separate)."""
        if self._mode == "sequential":
            raise ValueError(
                "CombinedLoader(mode='sequential') gives each iterable's batches separately; "
                "iterate it for (batch, batch_idx, dataloader_idx)."
            )
        # Where the length is known, stop at it: a loader that ends together with the
        # longest one is not started again (its workers and its shuffle's draw) for nothing.
        total: int | None = None
        if self._mode == "max_size_cycle":
            with contextlib.suppress(TypeError):
                total = len(self)
        if not self._leaves or total == 0:
            return
        iterators = [iter(leaf) for leaf in self._leaves]
        ended = [False] * len(iterators)
        count = 0
        while total is None or count < total:
            count += 1
            items: list[Any] = []
            for i, iterator in enumerate(iterators):
                try:
                    items.append(next(iterator))
                    continue
                except StopIteration:
                    ended[i] = True
                if self._mode == "min_size" or all(ended):
                    return
                if self._mode == "max_size":
                    items.append(None)
                    continue
                # max_size_cycle: start this one again (its shuffle draws a new order).
                iterators[i] = iter(self._leaves[i])
                try:
                    items.append(next(iterators[i]))
                except StopIteration:
                    return  # an empty iterable: nothing to cycle through
            yield self._rebuild(items)

    def _sequential(self) -> Iterator[tuple[Any, int, int]]:
        for dataloader_idx, leaf in enumerate(self._leaves):
            for batch_idx, batch in enumerate(leaf):
                yield batch, batch_idx, dataloader_idx

    def __repr__(self) -> str:
        return f"CombinedLoader({self._iterables!r}, mode={self._mode!r})"


class CombinedBatches:
    """What a training loop iterates for a :class:`CombinedLoader`: its batches alone.

    It has the combined loader's length, and its loaders are reachable for what is
    done to each one (a distributed sampler, the sampler's epoch, the random state
    of its shuffle).
    """

    def __init__(self, combined: CombinedLoader) -> None:
        if combined.mode == "sequential":
            raise ValueError(
                "Training cannot read CombinedLoader(mode='sequential'): a training step "
                "takes one batch at a time from every loader. Use 'max_size_cycle' (the "
                "default for a list or dict of loaders), 'min_size' or 'max_size'."
            )
        self.combined = combined

    @property
    def loaders(self) -> list[Any]:
        """The combined loaders, as a flat list."""
        return self.combined.flattened

    def map_loaders(self, change: Callable[[Any], Any]) -> CombinedBatches:
        """The same combination of ``change(loader)`` for each loader."""
        combined = CombinedLoader(self.combined.iterables, self.combined.mode)
        combined.flattened = [change(loader) for loader in self.loaders]
        return CombinedBatches(combined)

    def __iter__(self) -> Iterator[Any]:
        return self.combined.batches()

    def __len__(self) -> int:
        return len(self.combined)


def as_given(loader: Any) -> Any:
    """What ``trainer.train_dataloader`` shows for the loop's training iterable.

    Combined loaders show as their collection (``trainer.train_dataloader["a"]``),
    as in Lightning; anything else as it is.
    """
    return loader.combined.iterables if isinstance(loader, CombinedBatches) else loader


def training_iterable(given: Any) -> Any:
    """What the training loop iterates for the training data a user gave.

    A list, tuple or dict of dataloaders (a dict of any iterables) is combined in
    ``"max_size_cycle"`` mode, as Lightning combines it; a :class:`CombinedLoader` is
    read in its own mode; anything else (a DataLoader, a list of batches) is iterated
    as it is.
    """
    if isinstance(given, CombinedLoader):
        return CombinedBatches(given)
    if is_loader_collection(given):
        return CombinedBatches(CombinedLoader(given, "max_size_cycle"))
    return given
