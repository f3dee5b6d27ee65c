"""The Trainer's checkpoint entry points: saving the run's state, loading weights into a run.

``Trainer.save_checkpoint`` and ``dump_checkpoint`` (public, Lightning's names), and
what ``validate``/``test``/``predict`` use to load ``ckpt_path``. The Trainer
(``trainkit/trainer/trainer.py``) inherits them; the state itself is collected and
restored by :mod:`trainkit.checkpoint.restore`. The Trainer's ``warn`` and ``print``
(from one process) are here too.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.defaults import (
    best_checkpoint_path,
    checkpoint_callbacks,
    last_checkpoint_paths,
)
from trainkit.checkpoint import weights as checkpoint_io
from trainkit.checkpoint.files import weights_only_load
from trainkit.checkpoint.restore import collect_state
from trainkit.core.epoch_position import stateful_loaders
from trainkit.trainer.properties import TrainerViews

if TYPE_CHECKING:
    from trainkit.core.data import DataModule
    from trainkit.core.module import Module
    from trainkit.loops.run import Run


class TrainerCheckpoints(TrainerViews):
    """Saving and loading checkpoints, and the Trainer's warnings and prints."""

    # Set by the Trainer's constructor and its runs.
    ckpt_path: str | None
    _current: Run | None
    #: The ``weights_only`` the running entry point passed (False: unpickle any object).
    _weights_only: bool | None = None  # as passed to fit/validate/test/predict

    # ------------------------------------------------------------ warnings, prints
    def warn(self, message: str) -> None:
        """Emit a warning from global rank 0 only.

        Args:
            message: the warning text.
        """
        if self.is_global_zero:
            warnings.warn(message, stacklevel=2)

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` from the first process of each machine only (local rank 0).

        Args:
            *args: passed to ``print``.
            **kwargs: passed to ``print``.
        """
        if self.local_rank == 0:
            print(*args, **kwargs)

    # ------------------------------------------------------------ checkpoints
    def save_checkpoint(
        self,
        filepath: str | os.PathLike[str],
        weights_only: bool = False,
        storage_options: Any | None = None,
    ) -> None:
        """Save the full training state to ``filepath`` (atomically; global rank 0 writes).

        The checkpoint holds the model, optimizers, LR schedulers, the run's state
        (counters, data position), callback states, random states, the logged
        metrics so far, the loggers' versions, the hyperparameters and the
        trainkit and torch versions. Saved at a resume point (where
        ModelCheckpoint saves), it resumes exactly.

        Args:
            filepath: the file to write.
            weights_only: keep only the weights and hyperparameters (what Lightning's
                weights-only file keeps); such a file loads, but does not resume.
            storage_options: Lightning's options for a checkpoint-IO plugin; trainkit
                writes local files itself, so only None is accepted.

        Raises:
            ValueError: ``storage_options`` given.
        """
        if storage_options is not None:
            raise ValueError(
                "trainer.save_checkpoint(storage_options=...) is for Lightning's checkpoint-IO "
                "plugins; trainkit writes the file itself (atomically, with a digest). Save "
                "without storage_options, to a local or mounted path."
            )
        self.strategy.save_checkpoint(self.dump_checkpoint(weights_only), filepath)

    def dump_checkpoint(self, weights_only: bool = False) -> dict[str, Any]:
        """The run's state as :meth:`save_checkpoint` writes it (a dict; nothing is written).

        Args:
            weights_only: keep only the weights and hyperparameters.
        """
        module, run = self.module, self._current  # no model: self.module says how to attach one
        if run is None or run.module is not module:
            raise RuntimeError(
                "trainer.save_checkpoint() needs a run: call it during or after "
                "trainer.fit(model, ...), validate, test or predict."
            )
        # The training loaders that keep their own position save it, as of the running
        # batch (the loop may have read one ahead: see epoch_batches).
        stateful = stateful_loaders(run.fit.train_loader) if run.fit is not None else []
        states = None
        if stateful and not weights_only:
            states = run.state.loader_states or [one.state_dict() for one in stateful]
        return collect_state(run, weights_only=weights_only, loader_states=states)

    def _last_checkpoint_paths(self) -> list[Path]:
        return last_checkpoint_paths(self.callbacks, self.default_root_dir)

    def _run_last_path(self) -> Path:
        """Where a stop for a signal saves this run's ``last.ckpt``: the first
        ModelCheckpoint's file for this run (never another run's), else the default."""
        callbacks = checkpoint_callbacks(self.callbacks)
        if callbacks:
            return Path(callbacks[0].run_last_path(self))  # type: ignore[arg-type]
        return self._last_checkpoint_paths()[0]

    def _read_checkpoint(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        return self.strategy.load_checkpoint(path, weights_only_load(self._weights_only))

    def _load_weights(
        self,
        model: Module,
        ckpt_path: str | os.PathLike[str] | None,
        datamodule: DataModule | None = None,
    ) -> None:
        if ckpt_path is not None and os.fspath(ckpt_path) == "best":
            fn = self.state.fn  # a TrainerFn: its value is the entry point's name
            ckpt_path = best_checkpoint_path(self.callbacks, getattr(fn, "value", fn) or "test")
        resolved = checkpoint_io.resolve_path(ckpt_path, self._last_checkpoint_paths(), self.warn)
        self.ckpt_path = str(resolved) if resolved is not None else None
        if resolved is None:
            return
        checkpoint = self._read_checkpoint(resolved)
        model.on_load_checkpoint(checkpoint)
        checkpoint_io.load_module_state(
            model,
            checkpoint_io.weights(checkpoint, resolved),
            str(resolved),
            strict=model.strict_loading,
        )
        checkpoint_io.restore_datamodule(datamodule, checkpoint)
