"""A training epoch's batches from a position: where a resumed epoch goes on.

- :func:`epoch_batches` gives an epoch's ``(batch_idx, batch, is_last)`` and
  records the random state its order is drawn from; a resumed epoch draws the
  same order again and skips the batches already consumed (:func:`skip_batches`:
  by index for a DataLoader, so no skipped sample is loaded; by reading them
  again for an iterable without indices, with a warning);
- loaders that keep their own position (:func:`stateful_loaders`: they have
  ``state_dict()`` and ``load_state_dict()``) are put back at it instead, and
  for those without a length the position of the batch the loop runs is kept
  (the loop reads one batch ahead), for a checkpoint to save.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any

from torch.utils.data import RandomSampler, Sampler

from trainkit.core.data import (
    batches,
    loader_generators,
    loaders_of,
    rebuild_dataloader,
    takes_sampler,
)
from trainkit.utilities.combined_loader import CombinedBatches
from trainkit.utilities.rank_zero import rank_zero_warn
from trainkit.utilities.seed import capture_rng_states, restore_rng_states


class _SkipFirst(Sampler[Any]):
    """A sampler (or batch sampler) without its first ``skip`` items.

    Skipping happens on indices: no sample of a skipped batch is ever loaded.
    """

    def __init__(self, inner: Iterable[Any], skip: int) -> None:
        self.inner = inner
        self.skip = skip

    def __iter__(self) -> Iterator[Any]:
        return islice(iter(self.inner), self.skip, None)

    def __len__(self) -> int:
        return max(0, len(self.inner) - self.skip)  # type: ignore[arg-type]


def skip_batches(loader: Iterable[Any], skip: int) -> Iterable[Any]:
    """``loader`` without its first ``skip`` batches, for resuming mid-epoch.

    A DataLoader is rebuilt with the same settings around a batch sampler that
    drops the first ``skip`` batches of indices, so the skipped samples are never
    loaded; a list (or other sequence) of batches is sliced.

    Args:
        loader: the training dataloader, as the strategy prepared it.
        skip: batches of the current epoch already consumed.

    An iterable without indices (an iterable-style dataset) is read from its start
    and its first ``skip`` batches dropped, with a warning.
    """
    if skip == 0:
        return loader
    if isinstance(loader, CombinedBatches):
        return _skip_combined(loader, skip)
    if isinstance(loader, Sequence):
        return loader[skip:]
    if not takes_sampler(loader):
        rank_zero_warn(
            "You're resuming from a checkpoint that ended before the epoch ended and your "
            f"dataloader is not resumable: a {type(loader).__name__} over "
            f"{type(getattr(loader, 'dataset', loader)).__name__} has no index to skip to, so "
            f"its first {skip} batches are read again and dropped. The epoch goes on as the "
            "interrupted one did only if it yields the same batches in every run; give the "
            "loader state_dict() and load_state_dict() (as torchdata's StatefulDataLoader has) "
            "to resume it where it stopped, or resume from a checkpoint saved at an epoch's end."
        )
        return islice(loader, skip, None)
    if loader.batch_sampler is not None:
        return rebuild_dataloader(loader, batch_sampler=_SkipFirst(loader.batch_sampler, skip))
    return rebuild_dataloader(loader, sampler=_SkipFirst(loader.sampler, skip))


class _SkipIterated:
    """Combined batches without the first ``skip``, skipped by reading them."""

    def __init__(self, inner: CombinedBatches, skip: int) -> None:
        self.inner, self.skip = inner, skip

    def __iter__(self) -> Iterator[Any]:
        return islice(iter(self.inner), self.skip, None)

    def __len__(self) -> int:
        return max(0, len(self.inner) - self.skip)


def _skip_combined(loader: CombinedBatches, skip: int) -> Iterable[Any]:
    # Each loader's position depends on the others' lengths (a shorter one cycles), so
    # the epoch is read again from its start state up to the resume point.
    cycled = [
        i
        for i, one in enumerate(loader.loaders)
        if isinstance(getattr(one, "sampler", None), RandomSampler)
        and not loader_generators(one)
        and len(one) <= skip
    ]
    if cycled:
        rank_zero_warn(
            f"Resuming {skip} batches into an epoch of combined training loaders: loader(s) "
            f"{cycled} had started again before that point and drew their new order from "
            "torch's global random state, which training had moved on since; their batches "
            "from here on differ from the interrupted run's. Give each shuffled loader its "
            "own generator (DataLoader(..., generator=torch.Generator().manual_seed(n))) "
            "for an exact resume."
        )
    return _SkipIterated(loader, skip)


def stateful_loaders(loader: Iterable[Any]) -> list[Any]:
    """The training loaders (each of combined ones) that keep their own position.

    Those with ``state_dict()`` and ``load_state_dict()`` (torchdata's
    ``StatefulDataLoader``, an iterable of your own), as Lightning finds them: a
    checkpoint holds their states, and a mid-epoch resume loads them instead of
    skipping batches.

    Example:
        >>> class Stream:
        ...     def __iter__(self): return iter(range(3))
        ...     def state_dict(self): return {}
        ...     def load_state_dict(self, state): pass
        >>> [type(one).__name__ for one in stateful_loaders(Stream())], stateful_loaders([1, 2])
        (['Stream'], [])
    """
    return [
        one
        for one in loaders_of(loader)
        if callable(getattr(one, "state_dict", None))
        and callable(getattr(one, "load_state_dict", None))
    ]


def _resume_stateful(loader: Iterable[Any], stateful: list[Any], states: list[Any]) -> bool:
    # Each loader back at its saved position; False (skip batches instead) unless all keep one.
    if not stateful or len(stateful) != len(loaders_of(loader)):
        return False
    if len(states) != len(stateful):
        raise ValueError(
            f"The checkpoint holds the positions of {len(states)} stateful training loaders, "
            f"but this fit has {len(stateful)}: pass the dataloaders the saved run trained on."
        )
    for one, state in zip(stateful, states, strict=True):
        one.load_state_dict(state)
    return True


def _kept_positions(
    loader: Iterable[Any], start: int, stateful: list[Any], positions: list[Any]
) -> Iterator[tuple[int, Any, bool]]:
    # Unknown length: the loop reads one batch ahead, so the loaders' own states are one
    # batch past the loop's. Each batch's position is kept as it was before the next was
    # read: a checkpoint saves that one.
    iterator = iter(loader)
    try:
        batch = next(iterator)
    except StopIteration:
        return
    position = [one.state_dict() for one in stateful]
    batch_idx = start
    for upcoming in iterator:
        positions[:] = position
        yield batch_idx, batch, False
        position = [one.state_dict() for one in stateful]
        batch, batch_idx = upcoming, batch_idx + 1
    positions[:] = position
    yield batch_idx, batch, True


def epoch_batches(
    loader: Iterable[Any],
    total: float,
    first: int,
    start_rng: dict[str, Any] | None,
    positions: list[Any] | None = None,
) -> tuple[Iterator[tuple[int, Any, bool]], dict[str, Any]]:
    """A training epoch's ``(batch_idx, batch, is_last)`` from batch ``first`` on.

    A new epoch (``first == 0``) records the random state its shuffle starts
    from. A resumed epoch (``first > 0``) goes back to ``start_rng``, the state
    the interrupted epoch started from, so that the sampler draws the same
    order; skips the consumed batches by index (no skipped sample is loaded);
    and then returns to the state the checkpoint was saved in.

    Args:
        loader: the training dataloader.
        total: batches in the epoch.
        first: batches of this epoch already consumed.
        start_rng: the epoch's starting random state (for ``first > 0``; None, as
            after resuming a Lightning checkpoint mid-epoch, draws a new order).
        positions: the positions of the loaders that keep their own
            (:func:`stateful_loaders`). Given with ``first > 0``, the saved ones: each
            is loaded, and the batches go on from there, none skipped. Then, for such
            loaders without a length, the list is kept holding their positions as of
            the batch the loop runs (a checkpoint saves those); else it is emptied.

    Returns:
        The batches, and the random state the epoch's order is drawn from.
    """
    stateful = stateful_loaders(loader) if positions is not None else []
    if stateful:
        assert positions is not None
        if first > 0 and positions and _resume_stateful(loader, stateful, positions):
            positions.clear()
            start_rng = start_rng or capture_data_rng(loader)
            if total != math.inf:
                return batches(loader, total, start=first), start_rng
            return _kept_positions(loader, first, stateful, positions), start_rng
        positions.clear()
        if first == 0 and total == math.inf:
            return _kept_positions(loader, 0, stateful, positions), capture_data_rng(loader)
    if first == 0 or start_rng is None:
        # Capture before iterating: creating the loader's iterator draws its seed.
        start = capture_data_rng(loader)
        if first == 0:
            return batches(loader, total), start
        start_rng = start  # no record of the epoch's order: skip into a new one
    resumed_rng = capture_data_rng(loader)
    restore_data_rng(loader, start_rng)
    iterator = batches(skip_batches(loader, first), total, start=first)
    # Fetch the first batch now: a sampler draws its shuffle seed when first asked
    # for an index, and that draw must come from the epoch's starting state.
    head = next(iterator, None)
    if isinstance(loader, CombinedBatches):
        # Reading up to here drew what the loaders' own generators draw (a shorter
        # loader's new order each time it starts again): they stay where it left them.
        restore_rng_states(resumed_rng["global"])
    else:
        restore_data_rng(loader, resumed_rng)
    return (chain((head,), iterator) if head is not None else iter(())), start_rng


def capture_data_rng(loader: Iterable[Any]) -> dict[str, Any]:
    """Every random state an epoch's data order depends on (global and the loader's own).

    Args:
        loader: the training dataloader.
    """
    generators = [generator.get_state() for generator in loader_generators(loader)]
    return {"global": capture_rng_states(), "generators": generators}


def restore_data_rng(loader: Iterable[Any], states: dict[str, Any]) -> None:
    """Restore what :func:`capture_data_rng` captured.

    Args:
        loader: the same training dataloader.
        states: the captured states.
    """
    restore_rng_states(states["global"])
    for generator, saved in zip(loader_generators(loader), states["generators"], strict=True):
        generator.set_state(saved)


def set_sampler_epoch(loader: Iterable[Any], epoch: int) -> None:
    """Tell the loader's samplers the epoch (distributed samplers reshuffle only then).

    Args:
        loader: a dataloader (combined ones: each of them).
        epoch: the epoch, counted from 0.
    """
    for one in loaders_of(loader):
        batch_sampler = getattr(one, "batch_sampler", None)
        holders = (
            one,
            getattr(one, "sampler", None),
            batch_sampler,
            getattr(batch_sampler, "sampler", None),
        )
        # Each once: a DataLoader's sampler is also its batch sampler's.
        for holder in {id(holder): holder for holder in holders}.values():
            set_epoch = getattr(holder, "set_epoch", None)
            if callable(set_epoch):
                set_epoch(epoch)
