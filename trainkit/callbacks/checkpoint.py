"""ModelCheckpoint: save the training state on a schedule, keep the best k, and ``last``.

Saving happens only at *resume points* (see ``Callback.on_resume_point``): the
schedule hooks (``on_train_batch_end``, ``on_train_epoch_end``) only note that a
save is due, and the save follows at the next resume point, once that batch's
validation or that epoch's end is complete. Every checkpoint therefore resumes
exactly.

Bookkeeping rules (they survive resume, because they are saved in each
checkpoint):

- never more than ``save_top_k`` scored files are kept;
- a file is deleted only if this run's lineage (the run and its resumes) wrote
  it; a file of the same name that another run wrote is never overwritten (the
  new file gets a ``-v1`` suffix instead);
- after a resume, files this lineage wrote *after* the checkpoint it resumed
  from (the interrupted run's future) are removed: the resumed run writes its
  own.
- ``last.ckpt`` is replaced atomically (a hard link to the newest file, or an
  atomic copy), never left dangling.
"""

from __future__ import annotations

import math
import os
import re
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Callback
from trainkit.checkpoint import link_atomic, peek

if TYPE_CHECKING:
    from trainkit.module import Module
    from trainkit.trainer import Trainer

_FIELD = re.compile(r"\{([^{}:]+)(:[^{}]*)?\}")
EXTENSION = ".ckpt"
LAST = "last"


class ModelCheckpoint(Callback):
    """Save checkpoints during ``fit``.

    Args:
        dirpath: folder for the files (default ``<default_root_dir>/checkpoints``).
        filename: a template over ``epoch``, ``step`` and logged metrics, e.g.
            ``"{epoch}-{val/acc:.4f}"``, rendered as ``epoch=3-val_acc=0.9712``
            (names are inserted, and ``/`` becomes ``_``). Default ``"{epoch}-{step}"``.
        monitor: the metric that ranks checkpoints (None: the newest rank best).
        mode: "min" or "max": which values of ``monitor`` are better.
        save_top_k: how many scored files to keep (-1: all, 0: none besides last).
        save_last: also keep ``last.ckpt``, the newest state (for ``ckpt_path="last"``).
        every_n_train_steps: save every n optimizer steps.
        every_n_epochs: save every n epochs (the default, n=1, when no other
            schedule is given).
        train_time_interval: save when this much time (a ``timedelta`` or seconds)
            has passed since the last save.

    Example:
        >>> checkpoint = ModelCheckpoint(monitor="val/acc", mode="max", save_top_k=2)
    """

    def __init__(
        self,
        dirpath: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        monitor: str | None = None,
        mode: str = "min",
        save_top_k: int = 1,
        save_last: bool = True,
        every_n_train_steps: int | None = None,
        every_n_epochs: int | None = None,
        train_time_interval: timedelta | float | None = None,
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f'ModelCheckpoint(mode={mode!r}) must be "min" or "max".')
        if not isinstance(save_top_k, int) or save_top_k < -1:
            raise ValueError(
                f"ModelCheckpoint(save_top_k={save_top_k!r}) must be -1 (keep all), 0 "
                "(keep none besides last) or a positive number."
            )
        for name, value in (
            ("every_n_train_steps", every_n_train_steps),
            ("every_n_epochs", every_n_epochs),
        ):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"ModelCheckpoint({name}={value!r}) must be a positive integer.")
        seconds = (
            train_time_interval.total_seconds()
            if isinstance(train_time_interval, timedelta)
            else train_time_interval
        )
        if seconds is not None and seconds <= 0:
            raise ValueError(
                f"ModelCheckpoint(train_time_interval={train_time_interval!r}) must be positive."
            )
        schedules = [v for v in (every_n_train_steps, every_n_epochs, seconds) if v is not None]
        if len(schedules) > 1:
            raise ValueError(
                "ModelCheckpoint takes one of every_n_train_steps, every_n_epochs and "
                "train_time_interval; use two ModelCheckpoint callbacks for two schedules."
            )
        if not schedules:
            every_n_epochs = 1
        self.dirpath = os.fspath(dirpath) if dirpath is not None else None
        self.filename = filename or "{epoch}-{step}"
        self.monitor = monitor
        self.mode = mode
        self.save_top_k = save_top_k
        self.save_last = save_last
        self.every_n_train_steps = every_n_train_steps
        self.every_n_epochs = every_n_epochs
        self.train_time_interval = seconds

        #: Scored files this lineage keeps: path -> score.
        self.best_k_models: dict[str, float] = {}
        self.best_model_path = ""
        self.best_model_score: float | None = None
        self.last_model_path = ""
        self._due = False
        self._last_save_time = time.monotonic()
        self._last_saved_step = -1
        self._warned_missing: set[str] = set()

    @property
    def state_key(self) -> str:
        return (
            f"ModelCheckpoint{{'monitor': {self.monitor!r}, 'mode': {self.mode!r}, "
            f"'every_n_train_steps': {self.every_n_train_steps}, "
            f"'every_n_epochs': {self.every_n_epochs}, "
            f"'train_time_interval': {self.train_time_interval}}}"
        )

    # ------------------------------------------------------------- schedule
    def uses_hook(self, name: str) -> bool:
        # Only a step or time schedule needs to look at every batch.
        if name == "on_train_batch_end":
            return self.every_n_train_steps is not None or self.train_time_interval is not None
        return True

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Fix the folder and start the clock for time-based saving."""
        if self.dirpath is None:
            self.dirpath = os.path.join(trainer.default_root_dir, "checkpoints")
        self._last_save_time = time.monotonic()

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """After a resume, remove this lineage's files from the interrupted run's future."""
        if trainer.global_step > 0 or trainer.current_epoch > 0:
            self._remove_future_files(trainer)

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Note a step- or time-based save; it happens at the next resume point."""
        step = trainer.global_step
        if self.every_n_train_steps and step % self.every_n_train_steps == 0:
            self._due = self._due or step != self._last_saved_step
        interval = self.train_time_interval
        if interval is not None and time.monotonic() - self._last_save_time >= interval:
            self._due = True

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Note an epoch-based save; it happens at the resume point after the epoch."""
        if self.every_n_epochs and (trainer.current_epoch + 1) % self.every_n_epochs == 0:
            self._due = True

    def on_resume_point(self, trainer: Trainer, module: Module) -> None:
        """Save if a save is due."""
        if self._due:
            self._due = False
            self.save(trainer)

    # ---------------------------------------------------------------- saving
    def last_checkpoint_path(self, default_root_dir: str) -> str:
        """Where ``last.ckpt`` is (the Trainer looks here for ``ckpt_path="last"``).

        Args:
            default_root_dir: the Trainer's root folder (used until setup fixes ``dirpath``).
        """
        folder = self.dirpath or os.path.join(default_root_dir, "checkpoints")
        return os.path.join(folder, LAST + EXTENSION)

    def save(self, trainer: Trainer) -> None:
        """Save now: a scored file if it ranks in the top k, and ``last.ckpt``.

        Call it only at a resume point (the Trainer does, for preemption).

        Args:
            trainer: the running Trainer.
        """
        assert self.dirpath is not None, "setup() fixes the folder before any save"
        metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
        step = trainer.global_step
        # At the resume point after an epoch's end the counter already names the
        # next epoch; the file belongs to the one that just finished.
        epoch = trainer.current_epoch
        if trainer.state.batch_idx == 0 and epoch > 0:
            epoch -= 1
        score = self._score(metrics, step)
        written: str | None = None
        if score is not None and self._ranks(score):
            path = self._free_path(trainer, self._format(epoch, step, metrics))
            self.best_k_models[path] = score
            evicted = self._evict()
            self._update_best()
            if trainer.is_global_zero:
                # Remove first: a crash between the two steps leaves k - 1 files, never k + 1.
                for old in evicted:
                    Path(old).unlink(missing_ok=True)
            trainer.save_checkpoint(path)
            written = path
        if self.save_last:
            last = self.last_checkpoint_path(trainer.default_root_dir)
            self.last_model_path = last
            if written is not None:
                if trainer.is_global_zero:
                    link_atomic(written, last)
                trainer.strategy.barrier("last_checkpoint")
            else:
                trainer.save_checkpoint(last)
        self._last_save_time = time.monotonic()
        self._last_saved_step = step

    def _score(self, metrics: dict[str, float], step: int) -> float | None:
        if self.monitor is None:
            return float(step)  # without a metric, newer ranks better
        value = metrics.get(self.monitor)
        if value is None or math.isnan(value):
            if self.monitor not in self._warned_missing:
                self._warned_missing.add(self.monitor)
                warnings.warn(
                    f"ModelCheckpoint(monitor={self.monitor!r}) found no value for it at step "
                    f"{step} (logged: {sorted(metrics)}); no scored checkpoint was saved. Log "
                    "it with self.log, or fix the name.",
                    stacklevel=2,
                )
            return None
        return value

    def _ranks(self, score: float) -> bool:
        if self.save_top_k == 0:
            return False
        if self.save_top_k == -1 or len(self.best_k_models) < self.save_top_k:
            return True
        return self._is_better(score, self._worst()[1])

    def _is_better(self, score: float, other: float) -> bool:
        maximise = self.monitor is None or self.mode == "max"
        return score > other if maximise else score < other

    def _worst(self) -> tuple[str, float]:
        maximise = self.monitor is None or self.mode == "max"
        pick = min if maximise else max
        path = pick(self.best_k_models, key=lambda p: self.best_k_models[p])
        return path, self.best_k_models[path]

    def _evict(self) -> list[str]:
        evicted: list[str] = []
        while self.save_top_k != -1 and len(self.best_k_models) > self.save_top_k:
            path, _ = self._worst()
            del self.best_k_models[path]
            evicted.append(path)
        return evicted

    def _update_best(self) -> None:
        if not self.best_k_models:
            self.best_model_path, self.best_model_score = "", None
            return
        maximise = self.monitor is None or self.mode == "max"
        pick = max if maximise else min
        self.best_model_path = pick(self.best_k_models, key=lambda p: self.best_k_models[p])
        self.best_model_score = self.best_k_models[self.best_model_path]

    def _format(self, epoch: int, step: int, metrics: dict[str, float]) -> str:
        values: dict[str, float] = {**metrics, "epoch": epoch, "step": step}

        def render(match: re.Match[str]) -> str:
            name, spec = match.group(1).strip(), match.group(2) or ""
            value = values.get(name, math.nan)
            if name not in values and name not in self._warned_missing:
                self._warned_missing.add(name)
                warnings.warn(
                    f"ModelCheckpoint filename {self.filename!r} uses {name!r}, which was not "
                    f"logged (logged: {sorted(metrics)}); it is written as nan.",
                    stacklevel=3,
                )
            shown = (
                format(int(value), spec[1:])
                if name in ("epoch", "step")
                else (format(value, spec[1:]) if spec else f"{value}")
            )
            return f"{name.replace('/', '_')}={shown}"

        name = _FIELD.sub(render, self.filename).replace("/", "_")
        assert self.dirpath is not None
        return os.path.join(self.dirpath, name + EXTENSION)

    def _free_path(self, trainer: Trainer, path: str) -> str:
        """``path``, unless another run's file is there: then ``path-v1``, ``-v2``..."""
        candidate, version = path, 0
        while os.path.exists(candidate) and candidate not in self.best_k_models:
            info = peek(candidate)
            if info is not None and info["lineage"] == trainer.state.lineage:
                break  # our own (a stale file from before a resume): replace it
            version += 1
            stem = path[: -len(EXTENSION)]
            candidate = f"{stem}-v{version}{EXTENSION}"
        return candidate

    def _remove_future_files(self, trainer: Trainer) -> None:
        if not trainer.is_global_zero or self.dirpath is None or not os.path.isdir(self.dirpath):
            return
        last = os.path.abspath(self.last_checkpoint_path(trainer.default_root_dir))
        kept = {os.path.abspath(p) for p in self.best_k_models}
        for entry in os.scandir(self.dirpath):
            path = os.path.abspath(entry.path)
            if not entry.name.endswith(EXTENSION) or path == last or path in kept:
                continue
            info = peek(path)
            if (
                info is not None
                and info["lineage"] == trainer.state.lineage
                and info["global_step"] > trainer.global_step
            ):
                os.remove(path)

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {
            "dirpath": self.dirpath,
            "monitor": self.monitor,
            "best_k_models": dict(self.best_k_models),
            "best_model_path": self.best_model_path,
            "best_model_score": self.best_model_score,
            "last_model_path": self.last_model_path,
            "last_saved_step": self._last_saved_step,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the top-k table when the checkpoint belongs to this folder.

        Args:
            state_dict: what :meth:`state_dict` returned.
        """
        if state_dict.get("dirpath") != self.dirpath:
            warnings.warn(
                f"ModelCheckpoint: the checkpoint's files are in {state_dict.get('dirpath')}, "
                f"this run saves to {self.dirpath}; starting a new top-k table (nothing in "
                "the old folder will be deleted).",
                stacklevel=2,
            )
            return
        self.best_k_models = dict(state_dict["best_k_models"])
        self.best_model_path = state_dict["best_model_path"]
        self.best_model_score = state_dict["best_model_score"]
        self.last_model_path = state_dict["last_model_path"]
        self._last_saved_step = state_dict.get("last_saved_step", -1)
