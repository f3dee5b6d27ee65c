"""DataModule, and everything between a dataloader and a step.

- which dataloaders a run uses (:func:`find_dataloaders`), how many batches it
  takes from each (:func:`num_batches`, :func:`limit_batches`);
- iterating an epoch's batches (:func:`batches`; a resumed epoch's position:
  :mod:`trainkit.core.epoch_position`);
- getting a batch onto a device: a batch may be a tensor, or tensors nested in
  tuples, lists, dicts, namedtuples and dataclasses; :func:`move_data_to_device`
  rebuilds the same structure with every tensor (and every object with a
  ``.to(device)`` method) on the device.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from itertools import chain, repeat
from typing import IO, Any, TypeGuard, TypeVar

import torch
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    Sampler,
    SequentialSampler,
)

from trainkit.core.batches import move_data_to_device as move_data_to_device  # re-exported
from trainkit.core.hooks import DataHooks
from trainkit.core.hyperparameters import HyperparametersMixin
from trainkit.core.module import Module, overrides
from trainkit.utilities.combined_loader import CombinedBatches, CombinedLoader, training_iterable
from trainkit.utilities.seed import (
    seed_worker,
    seeding_workers,
)

T = TypeVar("T")
DataModuleT = TypeVar("DataModuleT", bound="DataModule")


class DataModule(DataHooks, HyperparametersMixin):
    """Groups the data of a project: download, splits and dataloaders.

    Override the methods you need. ``prepare_data`` runs once per node (for
    downloads); ``setup`` runs in every process.

    Example:
        >>> import torch
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> class RandomData(DataModule):
        ...     def setup(self, stage):
        ...         self.data = TensorDataset(torch.randn(8, 2), torch.zeros(8))
        ...     def train_dataloader(self):
        ...         return DataLoader(self.data, batch_size=4)
        >>> dm = RandomData()
        >>> dm.setup("fit")
        >>> len(dm.train_dataloader())
        2
    """

    #: The Trainer running this DataModule (None outside fit/validate/test/predict).
    trainer: Any = None
    #: A name for the DataModule (None by default; Lightning's attribute).
    name: str | None = None
    #: Where a checkpoint keeps the DataModule's hyperparameters (Lightning's names).
    CHECKPOINT_HYPER_PARAMS_KEY = "datamodule_hyper_parameters"
    #: The name they were saved under ("kwargs" for ``save_hyperparameters()``).
    CHECKPOINT_HYPER_PARAMS_NAME = "datamodule_hparams_name"
    #: Their type, when they are not a plain dict.
    CHECKPOINT_HYPER_PARAMS_TYPE = "datamodule_hparams_type"

    def __init__(self) -> None:
        self.trainer = None

    @classmethod
    def from_datasets(
        cls,
        train_dataset: Any = None,
        val_dataset: Any = None,
        test_dataset: Any = None,
        predict_dataset: Any = None,
        batch_size: int = 1,
        num_workers: int = 0,
        **datamodule_kwargs: Any,
    ) -> DataModule:
        """A DataModule (of this class) serving the given datasets (each may also be a
        list or dict of them), as Lightning's.

        The training loader shuffles; the others do not. The loaders pin memory when an
        accelerator is there to copy to (Lightning's always ask, and torch warns
        without one).

        Args:
            train_dataset: the training dataset(s).
            val_dataset: the validation dataset(s).
            test_dataset: the test dataset(s).
            predict_dataset: the prediction dataset(s).
            batch_size: the batch size of every loader; also given to ``__init__`` if it
                takes ``batch_size`` (or ``**kwargs``).
            num_workers: worker processes of every loader; also given to ``__init__`` if
                it takes ``num_workers`` (or ``**kwargs``).
            **datamodule_kwargs: the other arguments of the class's ``__init__``.

        Example:
            >>> dm = DataModule.from_datasets(list(range(10)), batch_size=4)
            >>> len(dm.train_dataloader())
            3
        """
        pin_memory = bool(torch.cuda.is_available())

        def loaders(dataset: Any, shuffle: bool) -> Any:
            if isinstance(dataset, Mapping):
                return {key: loaders(value, shuffle) for key, value in dataset.items()}
            if isinstance(dataset, (list, tuple)) and dataset and _is_dataset(dataset[0]):
                return [loaders(item, shuffle) for item in dataset]
            return DataLoader(
                dataset,
                batch_size=batch_size,
                shuffle=shuffle and not isinstance(dataset, IterableDataset),
                num_workers=num_workers,
                pin_memory=pin_memory,
            )

        parameters = inspect.signature(cls.__init__).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        sizes = {"batch_size": batch_size, "num_workers": num_workers}
        forwarded = {k: v for k, v in sizes.items() if takes_any or k in parameters}
        datamodule = cls(**datamodule_kwargs, **forwarded)
        given = {
            "train_dataloader": (train_dataset, True),
            "val_dataloader": (val_dataset, False),
            "test_dataloader": (test_dataset, False),
            "predict_dataloader": (predict_dataset, False),
        }
        for name, (dataset, shuffle) in given.items():
            if dataset is not None:
                setattr(datamodule, name, functools.partial(loaders, dataset, shuffle))
        return datamodule

    def on_exception(self, exception: BaseException) -> None:
        """Called when fit, validate, test or predict fails, after the callbacks' ``on_exception``.

        The exception is raised again afterwards (``teardown`` still runs).

        Args:
            exception: what ended the run.
        """

    def state_dict(self) -> dict[str, Any]:
        """State to save in checkpoints. Empty by default."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Args:
            state_dict: the saved state.
        """

    @classmethod
    def load_from_checkpoint(
        cls: type[DataModuleT],
        checkpoint_path: str | os.PathLike[str] | IO[bytes],
        map_location: Any = "cpu",
        hparams_file: str | os.PathLike[str] | None = None,
        weights_only: bool | None = None,
        **kwargs: Any,
    ) -> DataModuleT:
        """Build the DataModule from a checkpoint's DataModule hyperparameters.

        Reads trainkit's and Lightning 2.x's files: the hyperparameters saved under
        ``datamodule_hyper_parameters`` (``save_hyperparameters()`` in your
        ``__init__``), updated by ``kwargs``; then the state Lightning saved
        under the class's name, if any, goes to :meth:`load_state_dict`.

        Args:
            checkpoint_path: a checkpoint file (trainkit's or Lightning's), or a binary
                file object open on one.
            map_location: where to load tensors (CPU by default), as for ``torch.load``.
            hparams_file: a ``.yaml`` file whose hyperparameters replace the saved ones.
            weights_only: as for ``torch.load`` (None: True, no code stored in the file
                runs); False, for a file you trust, also rebuilds the hyperparameters
                that were saved as objects.
            **kwargs: ``__init__`` arguments that replace the saved ones.

        Returns:
            The DataModule.
        """
        from trainkit.checkpoint.files import DATAMODULE_PREFIX
        from trainkit.core.loading import build_saved, read_saved

        checkpoint, arguments, hparams = read_saved(
            cls,
            checkpoint_path,
            map_location,
            hparams_file,
            weights_only,
            kwargs,
            DATAMODULE_PREFIX,
        )
        datamodule = build_saved(cls, arguments, hparams, kwargs, hparams_file, checkpoint_path)
        saved = checkpoint.get(cls.__qualname__)
        if saved is None and checkpoint.get("format") is not None:
            saved = checkpoint.get("datamodule") or None  # where trainkit keeps it
        if saved is not None:
            datamodule.load_state_dict(saved)
        return datamodule


def _is_dataset(value: Any) -> bool:
    # A dataset (not a sample): a torch Dataset, or anything with __getitem__ and __len__.
    return isinstance(value, torch.utils.data.Dataset) or (
        hasattr(value, "__getitem__") and hasattr(value, "__len__") and not isinstance(value, str)
    )


def extract_batch_size(batch: Any) -> int:
    """Size of the first dimension of the first tensor found in ``batch`` (1 if none).

    As Lightning searches: depth first, past containers that hold no tensor (a
    list of file names before the images), so ``(names, images)`` is sized by the
    images.

    Args:
        batch: the batch.

    Example:
        >>> extract_batch_size((["a.png", "b.png"], torch.zeros(2, 3)))
        2
    """
    size = _first_tensor_size(batch)
    return 1 if size is None else size


def _first_tensor_size(batch: Any) -> int | None:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim > 0 else 1
    if isinstance(batch, Mapping):
        batch = batch.values()
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        batch = [getattr(batch, field.name) for field in dataclasses.fields(batch)]
    if isinstance(batch, Iterable) and not isinstance(batch, (str, bytes)):
        for item in batch:
            if isinstance(item, torch.Tensor) or (
                isinstance(item, (Mapping, list, tuple)) or dataclasses.is_dataclass(item)
            ):
                size = _first_tensor_size(item)
                if size is not None:
                    return size
    return None


def num_batches(dataloader: Iterable[Any]) -> float:
    """Number of batches a dataloader yields, or ``inf`` when it has no length.

    Args:
        dataloader: a DataLoader or any iterable of batches.
    """
    try:
        return float(len(dataloader))  # type: ignore[arg-type]
    except (TypeError, NotImplementedError):
        return math.inf


def limit_batches(available: float, limit: int | float, name: str) -> float:
    """Apply a ``limit_*_batches`` setting to the number of available batches.

    Args:
        available: batches the dataloader has (``inf`` when unknown).
        limit: an int (that many batches) or a float in [0, 1] (that fraction).
        name: the setting's name, for error messages.
    """
    if isinstance(limit, bool):
        raise TypeError(f"{name} must be an int or a float, got {limit!r}.")
    if isinstance(limit, int):
        return float(min(available, limit))
    if available == math.inf:
        if limit == 1.0:
            return math.inf
        raise ValueError(
            f"{name}={limit} is a fraction, but the dataloader has no length. Pass an "
            f"integer number of batches, e.g. {name}=100."
        )
    count = int(available * limit)
    if limit > 0 and count == 0:
        # A non-zero fraction of a tiny loader still runs one batch.
        count = 1
    return float(count)


def training_batches(dataloader: Iterable[Any], limit: int | float) -> float:
    """Batches per training epoch: the loader's length under ``limit_train_batches``.

    A training dataloader with no batches is an error (training would "finish"
    its epochs without a step); ``limit_train_batches=0`` is the way to skip
    training on purpose.

    Args:
        dataloader: the training dataloader.
        limit: the ``limit_train_batches`` option.

    Raises:
        ValueError: the dataloader has no batches and ``limit`` is not 0.
    """
    available = num_batches(dataloader)
    if available == 0 and limit != 0:
        dataset = getattr(dataloader, "dataset", None)
        size = len(dataset) if isinstance(dataset, Sized) else "an unknown number of"
        batch_size = getattr(dataloader, "batch_size", None)
        raise ValueError(
            f"The training dataloader has no batches ({size} samples, batch_size="
            f"{batch_size}, drop_last={getattr(dataloader, 'drop_last', None)}), so fit would "
            "end without training. Check that the dataset is not empty (and, with "
            "drop_last=True, holds at least one full batch per process), or pass "
            "limit_train_batches=0 to run only validation."
        )
    return limit_batches(available, limit, "limit_train_batches")


def each_loader(loader: Any, change: Callable[[Any], Any]) -> Any:
    """``change(loader)``, or for combined training loaders, each one changed.

    Args:
        loader: a dataloader, or the combined batches of several.
        change: what to do to one dataloader (e.g. give it a distributed sampler).
    """
    if isinstance(loader, CombinedBatches):
        return loader.map_loaders(change)
    return change(loader)


def shut_down_workers(loaders: Any) -> None:
    """End the worker processes that dataloaders keep between epochs (``persistent_workers``).

    Called when a run ends, so that no worker outlives ``fit``, ``validate``,
    ``test`` or ``predict`` (left to garbage collection, each takes seconds to
    join); the next run starts its workers again.

    Args:
        loaders: a dataloader, combined loaders, or a list, tuple or dict of them.
    """
    if isinstance(loaders, DataLoader):
        iterator, loaders._iterator = loaders._iterator, None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
    elif isinstance(loaders, CombinedBatches):
        shut_down_workers(loaders.loaders)
    elif isinstance(loaders, CombinedLoader):
        shut_down_workers(loaders.flattened)
    elif isinstance(loaders, Mapping):
        shut_down_workers(list(loaders.values()))
    elif isinstance(loaders, (list, tuple)):
        for loader in loaders:
            shut_down_workers(loader)


def loaders_of(loader: Any) -> list[Any]:
    """The dataloaders of ``loader``: each of combined training loaders, else itself."""
    return loader.loaders if isinstance(loader, CombinedBatches) else [loader]


def unshuffled(
    loader: Iterable[Any], warn: Callable[[str], None], kind: str = "train"
) -> Iterable[Any]:
    """``loader`` with its shuffling turned off (``overfit_batches`` trains on fixed batches).

    Args:
        loader: a training dataloader (one of combined ones: see :func:`each_loader`), or
            a validation one.
        warn: prints a warning (rank 0) when shuffling is turned off.
        kind: "train" or "val", for the warning.
    """
    # Any order but the dataset's own is replaced, as in Lightning (a sampler of
    # the user's own too); a DistributedSampler (several processes) is left to share.
    if not takes_sampler(loader) or isinstance(
        loader.sampler, (SequentialSampler, DistributedSampler)
    ):
        return loader
    warn(
        f"overfit_batches: you requested to overfit but enabled {kind} dataloader shuffling "
        f"({type(loader.sampler).__name__}); it is replaced by a SequentialSampler so that "
        "every epoch trains on the same batches."
    )
    return rebuild_dataloader(loader, sampler=SequentialSampler(loader.dataset))  # type: ignore[arg-type]


def takes_sampler(loader: Any) -> TypeGuard[DataLoader[Any]]:
    """Whether ``loader`` is a DataLoader whose order a sampler gives (not an iterable dataset's).

    Args:
        loader: any iterable of batches.

    Example:
        >>> takes_sampler(DataLoader(range(4))), takes_sampler([1, 2])
        (True, False)
    """
    return isinstance(loader, DataLoader) and not isinstance(loader.dataset, IterableDataset)


def rebuild_dataloader(
    loader: DataLoader[Any],
    *,
    sampler: Iterable[Any] | None = None,
    batch_sampler: Iterable[Any] | None = None,
    **overrides: Any,
) -> DataLoader[Any]:
    """A DataLoader like ``loader`` (workers, collate, pinning...) with another sampler.

    Args:
        loader: the DataLoader to copy the settings of.
        sampler: a sampler of indices, batched like ``loader`` batches.
        batch_sampler: or a sampler of whole batches of indices.
        **overrides: other DataLoader settings to change (e.g. ``worker_init_fn``).
    """
    options: dict[str, Any] = {
        "num_workers": loader.num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "persistent_workers": loader.persistent_workers,
        "pin_memory_device": loader.pin_memory_device,
    }
    if loader.num_workers > 0:
        options["prefetch_factor"] = loader.prefetch_factor
    options.update(overrides)
    if not takes_sampler(loader):
        # The dataset gives its own order: torch takes no sampler with it.
        if sampler is not None or batch_sampler is not None:
            raise ValueError("A DataLoader over an IterableDataset takes no sampler.")
        size, drop = loader.batch_size, loader.drop_last
        return DataLoader(loader.dataset, batch_size=size, drop_last=drop, **options)
    if batch_sampler is not None:
        return DataLoader(loader.dataset, batch_sampler=batch_sampler, **options)
    if loader.batch_sampler is None:  # the loader yields single samples
        return DataLoader(loader.dataset, batch_size=None, sampler=sampler, **options)
    return DataLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        drop_last=loader.drop_last,
        sampler=sampler,
        **options,
    )


class RecordedBatches(Sampler[list[int]]):
    """A batch sampler that keeps the dataset indices of each batch it gives, in order.

    ``seen[k]`` are batch ``k``'s indices (a worker's prefetching does not
    reorder them); each pass over the loader starts the list afresh. Prediction
    writers read them (their ``batch_indices``).

    Args:
        batch_sampler: the loader's own batch sampler, which it wraps.
    """

    def __init__(self, batch_sampler: Iterable[list[int]]) -> None:
        self.batch_sampler = batch_sampler
        self.seen: list[list[int]] = []

    def __iter__(self) -> Iterator[list[int]]:
        self.seen = []
        for batch in self.batch_sampler:
            self.seen.append(list(batch))
            yield batch

    def __len__(self) -> int:
        return len(self.batch_sampler)  # type: ignore[arg-type]


def recording_batches(loader: Iterable[Any]) -> Iterable[Any]:
    """``loader`` again, its batch sampler a :class:`RecordedBatches` (when it can be).

    Only a plain ``DataLoader`` over a map-style dataset is rebuilt (a subclass
    would lose its own behaviour); any other loader is returned as it is.

    Args:
        loader: a prepared prediction loader.
    """
    if type(loader) is not DataLoader or loader.batch_sampler is None or not takes_sampler(loader):
        return loader
    return rebuild_dataloader(loader, batch_sampler=RecordedBatches(loader.batch_sampler))


def loader_generators(loader: Iterable[Any]) -> list[torch.Generator]:
    """The random generators a dataloader's shuffling draws from, besides torch's global one.

    Their states are saved with a checkpoint so that a resumed epoch is shuffled
    exactly as the interrupted one was.

    Args:
        loader: a dataloader (combined loaders: all of theirs).
    """
    found: dict[int, torch.Generator] = {}
    for one in loaders_of(loader):
        batch_sampler = getattr(one, "batch_sampler", None)
        holders = (one, getattr(one, "sampler", None), getattr(batch_sampler, "sampler", None))
        for holder in holders:
            generator = getattr(holder, "generator", None)
            if isinstance(generator, torch.Generator):
                found[id(generator)] = generator
    return list(found.values())


def with_worker_seeding(loader: Iterable[Any]) -> Iterable[Any]:
    """``loader`` with :func:`trainkit.utilities.seed.seed_worker` as its ``worker_init_fn``.

    Only when ``seed_everything(..., workers=True)`` asked for it, the loader has
    workers, and the user gave no ``worker_init_fn`` of their own.

    Args:
        loader: a prepared dataloader (one of combined ones: see :func:`each_loader`).
    """
    if (
        not seeding_workers()
        or not isinstance(loader, DataLoader)
        or loader.num_workers == 0
        or loader.worker_init_fn is not None
    ):
        return loader
    if not takes_sampler(loader):
        return rebuild_dataloader(loader, worker_init_fn=seed_worker)
    if loader.batch_sampler is not None:
        return rebuild_dataloader(
            loader, batch_sampler=loader.batch_sampler, worker_init_fn=seed_worker
        )
    return rebuild_dataloader(loader, sampler=loader.sampler, worker_init_fn=seed_worker)


# ----------------------------------------------------------------- finding data
#: The dataloader method of each kind, on a DataModule or a Module.
_METHODS = {
    "train": "train_dataloader",
    "val": "val_dataloader",
    "test": "test_dataloader",
    "predict": "predict_dataloader",
}


def find_dataloaders(
    kind: str, given: Any, module: Any, datamodule: DataModule | None, *, required: bool
) -> list[Any]:
    """The dataloaders a run uses: those given, else the DataModule's, else the Module's.

    Args:
        kind: "train", "val", "test" or "predict".
        given: what the user passed to fit/validate/test/predict (None: nothing).
        module: the user's Module (its ``*_dataloader`` method is used if it defines one).
        datamodule: the DataModule, if any.
        required: raise if there is none (else return an empty list). An optional
            kind (validation in fit) takes only the methods a DataModule defines.

    Returns:
        One or more dataloaders, as a list.
    """
    method = _METHODS[kind]
    loaders = given
    # An optional kind takes only the methods a DataModule defines itself.
    if (
        loaders is None
        and datamodule is not None
        and (required or overrides(datamodule, method, DataModule))
    ):
        loaders = getattr(datamodule, method)()
    if loaders is None and overrides(module, method, Module):
        loaders = getattr(module, method)()
    if loaders is None:
        if not required:
            return []
        if kind == "train":
            raise ValueError(
                "Trainer.fit needs training data: pass train_dataloaders=..., a datamodule, "
                "or define train_dataloader() on the Module."
            )
        step = {"val": "validation", "test": "test", "predict": "predict"}[kind]
        raise ValueError(
            f"No {step} data: pass dataloaders=..., a datamodule, or define {method}() on "
            "the Module."
        )
    if kind == "train":
        # One training iterable: a list or dict of loaders combined (as Lightning does);
        # a list of batches stays one loader whose items are the batches.
        return [training_iterable(loaders)]
    if isinstance(loaders, CombinedLoader):  # sequential: its loaders one after the other
        return loaders.flattened if loaders.mode == "sequential" else [CombinedBatches(loaders)]
    if isinstance(loaders, Mapping):
        return NamedLoaders(loaders.values(), names=list(loaders))
    if not isinstance(loaders, (list, tuple)):
        return [loaders]
    return list(loaders)


# ------------------------------------------------------------- iterating batches
def batches(loader: Iterable[Any], total: float, start: int = 0) -> Iterator[tuple[int, Any, bool]]:
    """Yield ``(batch_idx, batch, is_last)`` for batch indices ``start`` up to ``total``.

    Args:
        loader: the dataloader (or any iterable of batches).
        total: how many batches the stage takes (``inf``: until the loader ends).
        start: the index of the loader's first batch (after a resumed epoch's skip).

    Example:
        >>> list(batches(["a", "b", "c"], total=2))
        [(0, 'a', False), (1, 'b', True)]
    """
    if total != math.inf:
        count = int(total) - start
        # All in C (no Python frame per batch): zip stops at the end of range()
        # before asking the loader for one batch too many.
        is_last = chain(repeat(False, count - 1), (True,))
        return zip(range(start, int(total)), loader, is_last, strict=False)
    return _batches_with_lookahead(loader, start)


def _batches_with_lookahead(loader: Iterable[Any], start: int) -> Iterator[tuple[int, Any, bool]]:
    # Unknown length: look one batch ahead to know which one is last.
    iterator = iter(loader)
    try:
        batch = next(iterator)
    except StopIteration:
        return
    batch_idx = start
    for upcoming in iterator:
        yield batch_idx, batch, False
        batch, batch_idx = upcoming, batch_idx + 1
    yield batch_idx, batch, True


class NamedLoaders(list):  # type: ignore[type-arg]
    """Evaluation dataloaders given as a dict: their list (in the dict's order) and its keys.

    The loops read them by index (``dataloader_idx``); ``trainer.val_dataloaders`` and
    the others show the dict again (:func:`one_or_list`).

    Args:
        loaders: the dataloaders.
        names: the dict's keys, one per loader.
    """

    def __init__(self, loaders: Iterable[Any], names: list[Any]) -> None:
        super().__init__(loaders)
        self.names = names


def one_or_list(loaders: list[Iterable[Any]]) -> Any:
    """What ``trainer.val_dataloaders`` (``test_``, ``predict_``) shows, as Lightning does:
    one loader alone, several as a list, or as the dict they were given in; None for none
    (fit without validation).

    Args:
        loaders: the prepared dataloaders.
    """
    if isinstance(loaders, NamedLoaders):
        return dict(zip(loaders.names, loaders, strict=True))
    if not loaders:
        return None
    return loaders[0] if len(loaders) == 1 else loaders


def batch_totals(loaders: list[Iterable[Any]], limit: int | float, name: str) -> list[float]:
    """Batches to run from each loader under a ``limit_*_batches`` option.

    Args:
        loaders: the prepared dataloaders.
        limit: the option's value.
        name: the option's name, for messages.
    """
    return [limit_batches(num_batches(dl), limit, name) for dl in loaders]
