"""ModelCheckpoint: save the training state on a schedule, keep the best k, and ``last``.

The arguments, attributes and file names follow Lightning's ``ModelCheckpoint``
(see docs/porting.md for where trainkit differs). Saving happens only at
*resume points* (see ``Callback.on_resume_point``): the schedule hooks
(``on_train_batch_end``, ``on_train_epoch_end``, ``on_validation_end``) only note
that a save is due, and the save follows at the next resume point, once that
batch's validation or that epoch's end is complete. Every checkpoint therefore
resumes exactly.

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

Where the files go: ``dirpath`` when given; else, with a logger, the run's own
folder ``<log_dir>/checkpoints`` (as Lightning does), so two runs never share
(or overwrite) each other's files; else ``<default_root_dir>/checkpoints``. The
run's folder is fixed when fit starts, after a resume has restored the
logger's version, so a resumed run keeps writing to the folder it wrote
before. ``<default_root_dir>/checkpoints/last.ckpt`` is then a symbolic link to
the newest run's ``last.ckpt`` (never replacing a real file there), and
``ckpt_path="last"`` resumes the newest run's ``last.ckpt``.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import warnings
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

import torch

from trainkit.callbacks.base import Checkpoint, validates_once_per_epoch
from trainkit.callbacks.checkpoint_forwarded import save_if_forwarded
from trainkit.checkpoint import sharded
from trainkit.checkpoint.files import link_atomic
from trainkit.checkpoint.restore import without_resume_state
from trainkit.checkpoint.run_files import (
    as_score,
    experiment_runs,
    folders_to_clean,
    free_path,
    newest_version,
    remove_future_files,
    render_filename,
    write_scores,
)
from trainkit.core.module import overrides
from trainkit.distributed.control import rank_zero_floats
from trainkit.loggers import run_folder
from trainkit.utilities.io import (
    deferred_folder_sync,
    local_path,
    remove_stale_temporaries,
    temporary_prefix,
)

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

EXTENSION = ".ckpt"
VERSION_COUNTER_NOTE = (
    "ModelCheckpoint(enable_version_counter=False) has no effect: trainkit never overwrites "
    "another run's file (this run's gets -v1, -v2...). Leave the option out to silence this."
)
LAST = "last"


class ModelCheckpoint(Checkpoint):
    """Save checkpoints during ``fit``.

    Args:
        dirpath: folder for the files. Default: the run's own folder,
            ``<log_dir>/checkpoints`` (``<save_dir>/<name>/version_N/checkpoints``
            of the first logger), or ``<default_root_dir>/checkpoints`` without a
            logger. Unlike Lightning's, a resumed run keeps its version, so it
            keeps its folder.
        filename: a template over ``epoch``, ``step`` and logged metrics, e.g.
            ``"{epoch}-{val_loss:.2f}"``, rendered as ``epoch=3-val_loss=0.97``
            (with ``auto_insert_metric_name``). Default ``"{epoch}-{step}"``. A
            ``/`` in a name becomes ``_`` (``val/acc`` -> ``val_acc``): the file
            stays in ``dirpath``. A name not logged is written as 0.
        monitor: the metric that ranks checkpoints; any logged value, or
            "epoch"/"step". None: no ranking, the newest checkpoints are kept.
        verbose: print what is saved and why (rank 0).
        save_last: also keep ``last.ckpt``, the newest state (for
            ``ckpt_path="last"``); "link" has the same meaning (trainkit always
            links when it can). None or False (the default, as in Lightning): no
            ``last.ckpt`` on the save schedule (a preemption signal still writes
            one). The callback the Trainer adds by itself keeps ``last.ckpt``.
        save_top_k: how many scored files to keep (-1: all, 0: none besides last).
        save_on_exception: must be False (trainkit saves only at resume points).
        save_weights_only: write only the model's weights and counters (such a
            file cannot resume training).
        mode: "min" or "max": which values of ``monitor`` are better.
        auto_insert_metric_name: write ``name=value`` for each template field;
            False writes the value alone.
        every_n_train_steps: save every n optimizer steps (0 or None: off).
        train_time_interval: save when this much time (a ``timedelta`` or seconds)
            has passed since the last save.
        every_n_epochs: save every n epochs (the default, n=1, when no other
            schedule is given; 0: never by epoch).
        save_on_train_epoch_end: check the epoch schedule at the training epoch's
            end (True) or after each validation run (False). None: at the epoch's end
            if validation runs only there (the defaults) or not at all, else after each
            (and with ``monitor=None`` at the epoch's end too: the newest state is kept).
        enable_version_counter: accepted for compatibility (False warns): trainkit always
            adds ``-v1``, ``-v2``... instead of overwriting another run's file.

    Attributes:
        best_model_path: the best scored file ("" before the first).
        best_model_score: its score (a tensor), None before the first.
        best_k_models: scored file -> score, the files kept.
        kth_best_model_path: the worst of the kept files once ``save_top_k`` are kept.
        kth_value: its score (a tensor; +inf/-inf before).
        current_score: the score of the latest file saved.
        last_model_path: where ``last.ckpt`` was last written.

    Example:
        >>> checkpoint = ModelCheckpoint(monitor="val/acc", mode="max", save_top_k=2)
        >>> checkpoint.format_checkpoint_name({"epoch": 1, "step": 20, "val/acc": 0.5})
        'epoch=1-step=20.ckpt'
    """

    #: Joins the parts of a file name (prefix, fields, version).
    CHECKPOINT_JOIN_CHAR = "-"
    #: Between a field's name and its value.
    CHECKPOINT_EQUALS_CHAR = "="
    #: The name (a template too) of the newest checkpoint.
    CHECKPOINT_NAME_LAST = LAST
    #: Every checkpoint file's extension.
    FILE_EXTENSION = EXTENSION
    #: The first version suffix given to a name already taken.
    STARTING_VERSION = 1

    def __init__(
        self,
        dirpath: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        monitor: str | None = None,
        verbose: bool = False,
        save_last: bool | Literal["link"] | None = None,
        save_top_k: int = 1,
        save_on_exception: bool = False,
        save_weights_only: bool = False,
        mode: str = "min",
        auto_insert_metric_name: bool = True,
        every_n_train_steps: int | None = None,
        train_time_interval: timedelta | float | None = None,
        every_n_epochs: int | None = None,
        save_on_train_epoch_end: bool | None = None,
        enable_version_counter: bool = True,
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(
                f'ModelCheckpoint(mode={mode!r}) must be "min" or "max" (`mode` can be '
                f"min or max, but got {mode})."
            )
        if save_on_exception:
            raise ValueError(
                "ModelCheckpoint(save_on_exception=True) is not supported: trainkit saves only "
                "where training resumes exactly, which the middle of a failing step is not. "
                "Resume from the last saved checkpoint (ckpt_path='last'); on SIGTERM trainkit "
                "saves last.ckpt at the next resume point by itself."
            )
        if not isinstance(save_top_k, int) or save_top_k < -1:
            raise ValueError(
                f"ModelCheckpoint(save_top_k={save_top_k!r}) must be -1 (keep all), 0 "
                "(keep none besides last) or a positive number."
            )
        if save_last not in (True, False, None, "link"):
            raise ValueError(f'ModelCheckpoint(save_last={save_last!r}) must be a bool or "link".')
        for name, value in (
            ("every_n_train_steps", every_n_train_steps),
            ("every_n_epochs", every_n_epochs),
        ):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(
                    f"ModelCheckpoint({name}={value!r}) must be 0 (off) or a positive integer. "
                    f"Invalid value for {name}={value!r}. Must be >= 0."
                )
        seconds = (
            train_time_interval.total_seconds()
            if isinstance(train_time_interval, timedelta)
            else train_time_interval
        )
        if seconds is not None and seconds <= 0:
            raise ValueError(
                f"ModelCheckpoint(train_time_interval={train_time_interval!r}) must be positive."
            )
        schedules = [
            v for v in (every_n_train_steps, every_n_epochs, seconds) if v is not None and v != 0
        ]
        if len(schedules) > 1:
            raise ValueError(
                "ModelCheckpoint takes one of every_n_train_steps, every_n_epochs and "
                "train_time_interval; use two ModelCheckpoint callbacks for two schedules "
                "(Combination of parameters every_n_train_steps, every_n_epochs and "
                "train_time_interval should be mutually exclusive)."
            )
        if every_n_train_steps is None and every_n_epochs is None and seconds is None:
            every_n_epochs = 1
        if dirpath:
            folder = local_path(os.fspath(dirpath), "ModelCheckpoint(dirpath=...)", "")
            self.dirpath: str | None = os.path.realpath(os.path.expanduser(folder))
        else:
            self.dirpath = None
        self._dirpath_given = self.dirpath is not None
        # With a logger and no dirpath: <save_dir>/<name>, whose version_N folders
        # hold the runs (the run's own is known once fit starts).
        self._runs_root: str | None = None
        self._root_dir: str | None = None
        self._pending_state: dict[str, Any] | None = None
        self.filename = filename
        self.monitor = monitor
        self.verbose = verbose
        self.mode = mode
        self.save_top_k = save_top_k
        self.save_last: bool | Literal["link"] = save_last or False
        self.save_weights_only = save_weights_only
        self.auto_insert_metric_name = auto_insert_metric_name
        self._every_n_train_steps = every_n_train_steps or 0  # Lightning's name: projects set it
        self._every_n_epochs = every_n_epochs or 0
        self.train_time_interval = seconds
        self._train_time_interval = train_time_interval
        self._save_on_train_epoch_end = save_on_train_epoch_end
        self._enable_version_counter = enable_version_counter
        if not enable_version_counter:
            warnings.warn(VERSION_COUNTER_NOTE, stacklevel=2)

        #: Scored files this lineage keeps: path -> score.
        self.best_k_models: dict[str, torch.Tensor] = {}
        self.best_model_path = ""
        self.best_model_score: torch.Tensor | None = None
        self.kth_best_model_path = ""
        self.kth_value = torch.tensor(math.inf if mode == "min" else -math.inf)
        self.current_score: torch.Tensor | None = None
        self.last_model_path = ""
        # Without a monitor the newest files are kept: path -> the step it was saved at.
        self._newest: dict[str, int] = {}
        self._due = False
        self._saved_this_fit = False
        self._fit_start_step = 0
        self._last_save_time = time.monotonic()
        self._time_checked = False  # on_train_batch_end read the clock (train_time_interval)
        self._last_saved_step = -1
        self._warned: set[str] = set()

    @property
    def every_n_train_steps(self) -> int:
        """Save every this many optimizer steps (0: not by steps)."""
        return self._every_n_train_steps

    @property
    def every_n_epochs(self) -> int:
        """Save every this many epochs; 0 when the schedule is by steps or time (or off).

        Without any schedule argument this is 1 (a save after every epoch), as
        Lightning documents.
        """
        return self._every_n_epochs

    @property
    def state_key(self) -> str:
        """The class name and the arguments that tell two ModelCheckpoints apart."""
        arguments = {
            "monitor": self.monitor,
            "mode": self.mode,
            "every_n_train_steps": self._every_n_train_steps,
            "every_n_epochs": self.every_n_epochs,
            "train_time_interval": self._train_time_interval,
        }
        return type(self).__qualname__ + repr(arguments)

    # ------------------------------------------------------------- schedule
    def uses_hook(self, name: str) -> bool:
        # Only a step or time schedule needs to look at every batch.
        if name == "on_train_batch_end":
            return bool(self._every_n_train_steps) or self.train_time_interval is not None
        return True

    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Choose the folder (the run's own is fixed at fit start); start the save clock."""
        self._root_dir = trainer.default_root_dir
        loggers = getattr(trainer, "loggers", None) or []
        if not self._dirpath_given and loggers:
            save_dir = loggers[0].save_dir or trainer.default_root_dir
            self._runs_root = os.path.join(save_dir, str(loggers[0].name))
            if stage == "fit":
                # Not the logger's version yet: reading it would claim a new version_N
                # before a resume restores the saved one (on_fit_start reads it).
                self.dirpath = None
            elif self.dirpath is None:  # validate/test/predict first: the logger's folder
                self.dirpath = self._logger_folder(trainer)
        elif not self._dirpath_given:
            self.dirpath = os.path.join(trainer.default_root_dir, "checkpoints")
        self._last_save_time = time.monotonic()
        self._saved_this_fit = False

    def _logger_folder(self, trainer: Trainer) -> str:
        # Only rank 0 reads the logger's version (elsewhere reading it would claim a folder).
        folder = self.__resolve_ckpt_dir(trainer) if trainer.is_global_zero else ""
        return str(trainer.strategy.broadcast(folder))

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Fix the run's folder, clean up after killed saves, and after a resume remove
        this lineage's files from the interrupted run's future."""
        if self.dirpath is None:  # the logger's folder, now that a resume restored its version
            self.dirpath = self._logger_folder(trainer)
        if self._pending_state is not None:
            pending, self._pending_state = self._pending_state, None
            self.load_state_dict(pending)
        if trainer.is_global_zero:
            for folder in folders_to_clean(self.dirpath, self._runs_root, self._root_dir):
                remove_stale_temporaries(folder)
        if trainer.global_step > 0 or trainer.current_epoch > 0:
            self._remove_future_files(trainer)
        self._fit_start_step = trainer.global_step

    def __resolve_ckpt_dir(self, trainer: Trainer) -> str:
        # The folder the files go to (Lightning's private name, which projects call):
        # dirpath, else the run's folder's "checkpoints". Reading a logger's folder
        # before fit starts claims its version.
        if self.dirpath is not None:
            return self.dirpath
        return os.path.join(run_folder(trainer.loggers, trainer.default_root_dir), "checkpoints")

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Note a step- or time-based save; it happens at the next resume point."""
        step = trainer.global_step
        if self._every_n_train_steps and step % self._every_n_train_steps == 0:
            self._due = self._due or step != self._last_saved_step
        interval = self.train_time_interval
        if interval is not None:  # checked here; agreed at the resume point (several ranks)
            self._time_checked = True
            self._due = self._due or time.monotonic() - self._last_save_time >= interval
        save_if_forwarded(self, trainer)  # another callback calls this one's hooks

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Note an epoch-based save; it happens at the resume point after the epoch."""
        if self._save_points(trainer)[0]:
            self._epoch_due(trainer)

    def on_validation_end(self, trainer: Trainer, module: Module) -> None:
        """Note an epoch-based save after validation when that is where it is checked."""
        fitting = getattr(getattr(trainer, "state", None), "fn", "fit") == "fit"
        if not trainer.sanity_checking and fitting and self._save_points(trainer)[1]:
            self._epoch_due(trainer)

    def on_resume_point(self, trainer: Trainer, module: Module) -> None:
        """Save if a save is due (once per global step)."""
        due, self._due = self._due, False
        checked, self._time_checked = self._time_checked, False
        if not due and not checked:
            # Nothing to decide: no save due, and no clock read since the last resume
            # point (a subclass that calls on_train_batch_end every n steps, to agree less
            # often, is agreed with every n steps).
            return
        if getattr(trainer, "fast_dev_run", False):
            return  # a fast dev run checks the code; it saves nothing
        if self.train_time_interval is not None and trainer.world_size > 1:
            # Each process has its own clock: rank 0's says when, for all of them.
            point = "ModelCheckpoint's train_time_interval check"
            due = bool(trainer.strategy.exchange(point, [int(due)])[0][0])
        if due and trainer.global_step != self._last_saved_step:
            self.save(trainer)

    def on_train_end(self, trainer: Trainer, module: Module) -> None:
        """Write ``last.ckpt`` if ``save_last`` asks for it and nothing was saved in this fit.

        A preempted run has saved ``last.ckpt`` at its resume point already; saving
        again here would record the stop, and the resumed run would stop at once.
        """
        if (
            self.save_last
            and not self._saved_this_fit
            and trainer.global_step > self._fit_start_step  # it trained (not a finished run)
            and not getattr(trainer, "fast_dev_run", 0)
            and not getattr(trainer, "preempted", False)
        ):
            self._save_last(trainer, None, self._monitor_candidates(trainer))
        elif self.save_last and trainer.is_global_zero and self._runs_root is not None:
            # A preempted run saved last.ckpt without this callback: link to it too.
            last = self.last_checkpoint_path(trainer.default_root_dir)
            if self._root_dir is not None and self.dirpath is not None and sharded.exists(last):
                self._point_to(last, os.path.join(self._root_dir, "checkpoints", LAST + EXTENSION))

    def _epoch_due(self, trainer: Trainer) -> None:
        every = self._every_n_epochs
        if every and (trainer.current_epoch + 1) % every == 0:
            self._due = True
            save_if_forwarded(self, trainer)

    def _save_points(self, trainer: Trainer) -> tuple[bool, bool]:
        # (At the training epoch's end, after each validation run.) None: after each (a file
        # holds the model its score was measured on) unless validation runs once per epoch at
        # its end, as Lightning; or none runs. Unscored files also at the end: the newest state.
        if self._save_on_train_epoch_end is not None:
            return self._save_on_train_epoch_end, not self._save_on_train_epoch_end
        after = not validates_once_per_epoch(trainer) and sum(trainer.num_val_batches) > 0
        after = after and overrides(trainer.module, "validation_step")
        return not after or self.monitor is None, after

    # ---------------------------------------------------------------- names
    def format_checkpoint_name(
        self,
        metrics: dict[str, Any],
        filename: str | None = None,
        ver: int | None = None,
        prefix: str | None = None,
    ) -> str:
        """The file a checkpoint with these ``metrics`` is saved to.

        Args:
            metrics: values for the template's fields (``epoch``, ``step``, metrics).
            filename: a template to use instead of ``self.filename``.
            ver: a version, appended as ``-v<ver>``.
            prefix: text put before the name, joined with ``-``.

        Returns:
            The path in ``dirpath`` (just the file name while ``dirpath`` is unset).

        Example:
            >>> ModelCheckpoint(filename="{epoch}-{val_loss:.2f}").format_checkpoint_name(
            ...     {"epoch": 1, "val_loss": 0.5}
            ... )
            'epoch=1-val_loss=0.50.ckpt'
        """
        name = self._render(filename or self.filename, metrics)
        if prefix:
            name = self.CHECKPOINT_JOIN_CHAR.join([prefix, name])
        if ver is not None:
            name = self.CHECKPOINT_JOIN_CHAR.join([name, f"v{ver}"])
        name += self.FILE_EXTENSION
        return os.path.join(self.dirpath, name) if self.dirpath else name

    def _render(self, template: str | None, metrics: dict[str, Any]) -> str:
        return render_filename(
            template or self.CHECKPOINT_JOIN_CHAR.join(["{epoch}", "{step}"]),
            metrics,
            self.CHECKPOINT_EQUALS_CHAR if self.auto_insert_metric_name else None,
            self._warn_once,
        )

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, stacklevel=4)

    # ---------------------------------------------------------------- saving
    def last_checkpoint_path(self, default_root_dir: str) -> str:
        """Where ``last.ckpt`` is (the Trainer looks here for ``ckpt_path="last"``).

        Before fit has fixed the run's folder (the default folder with a logger),
        this is the newest ``last.ckpt`` among the experiment's runs
        (``<save_dir>/<name>/*/checkpoints``, and ``<default_root_dir>/checkpoints``
        where an older trainkit kept it).

        Args:
            default_root_dir: the Trainer's root folder (used until setup fixes ``dirpath``).
        """
        name = self.CHECKPOINT_NAME_LAST + self.FILE_EXTENSION
        if self.last_model_path and self.CHECKPOINT_NAME_LAST != LAST:
            return self.last_model_path
        if self.dirpath is not None:
            return newest_version(os.path.join(self.dirpath, name), self.CHECKPOINT_JOIN_CHAR)
        legacy = os.path.join(default_root_dir, "checkpoints", name)
        if self._runs_root is None:
            return legacy
        runs = [os.path.join(r.path, "checkpoints", name) for r in experiment_runs(self._runs_root)]
        candidates = [p for p in [*runs, legacy] if sharded.exists(p) and not os.path.islink(p)]
        if not candidates:
            return os.path.join(self._runs_root, "*", "checkpoints", name)
        return max(candidates, key=sharded.saved_at)

    def run_last_path(self, trainer: Trainer) -> str:
        """Where this run writes its ``last.ckpt``: ``last.ckpt``, or ``last-v1.ckpt``...
        where another run's file has the name (it is never overwritten).

        Args:
            trainer: the running Trainer (its lineage tells its files from other runs').
        """
        if self.CHECKPOINT_NAME_LAST != LAST or self.dirpath is None:
            return self.last_checkpoint_path(trainer.default_root_dir)
        return self._free_path(trainer, os.path.join(self.dirpath, LAST + self.FILE_EXTENSION))

    def save(self, trainer: Trainer) -> None:
        """Save now: a scored file if it ranks in the top k, and ``last.ckpt``.

        Call it only at a resume point (the Trainer does, for preemption).

        Args:
            trainer: the running Trainer.
        """
        assert self.dirpath is not None, "setup() fixes the folder before any save"
        # The scored file and last.ckpt are renamed into one folder: one fsync of it.
        with deferred_folder_sync(self.dirpath):
            self._save(trainer)

    def _save(self, trainer: Trainer) -> None:
        own = not overrides(self, "_monitor_candidates", ModelCheckpoint)  # else Lightning's
        candidates = self._candidates(trainer, trainer.world_size > 1) if own else None
        candidates = self._monitor_candidates(trainer) if candidates is None else candidates
        if trainer.world_size > 1:
            candidates = self._rank_zero_candidates(trainer, candidates)
        step = trainer.global_step
        written: str | None = None
        if self.save_top_k != 0:
            if self.monitor is None:
                written = self._save_newest(trainer, candidates)
            else:
                written = self._save_scored(trainer, candidates)
        if self.save_last:
            self._save_last(trainer, written, candidates)
        if trainer.is_global_zero and (written is not None or self.save_last):
            for logger in trainer.loggers:  # trackers upload checkpoints (log_model)
                logger.after_save_checkpoint(self)
        self._last_save_time = time.monotonic()
        self._last_saved_step = step
        self._saved_this_fit = True

    def _monitor_candidates(self, trainer: Trainer) -> dict[str, Any]:  # subclasses extend it
        return self._candidates(trainer, synced=False)

    def _candidates(self, trainer: Trainer, synced: bool) -> dict[str, Any]:
        metrics = trainer.callback_metrics
        synced_metrics = getattr(metrics, "synced", None)
        if synced and synced_metrics is not None:  # every process: the decision below is shared
            metrics = synced_metrics()  # sync_dist step values reduced, as a ranked value must be
        candidates: dict[str, Any] = dict(metrics)
        # At the resume point after an epoch's end the counter already names the
        # next epoch; the file belongs to the one that just finished.
        epoch = trainer.current_epoch
        if trainer.state.batch_idx == 0 and epoch > 0:
            epoch -= 1
        candidates.setdefault("epoch", torch.tensor(epoch))
        candidates.setdefault("step", torch.tensor(trainer.global_step))
        return candidates

    def _rank_zero_candidates(self, trainer: Trainer, candidates: dict[str, Any]) -> dict[str, Any]:
        """Rank 0's values on every process, so that all take the same decisions and names.

        A value logged without ``sync_dist=True`` is each process's own; ranking
        each process's own would let one process save (and wait for the others
        at the write) while another does not.
        """
        point = f"ModelCheckpoint's save at step {trainer.global_step}"
        value = candidates.get(self.monitor) if self.monitor is not None else None
        mine = None if value is None else float(as_score(value))
        _, (differs,) = rank_zero_floats(trainer.strategy.exchange, [mine], point)
        if differs and trainer.is_global_zero:
            self._warn_once(
                f"differs:{self.monitor}",
                f"ModelCheckpoint(monitor={self.monitor!r}): the processes have different "
                f"values of {self.monitor!r} (logged without sync_dist=True), so every "
                "process ranks rank 0's value and saves with it. Log it with "
                f"self.log({self.monitor!r}, ..., sync_dist=True) to rank the mean over "
                "the processes.",
            )
        # As Python numbers: a small pickle, the same names and scores.
        plain = {
            name: value.item() if isinstance(value, torch.Tensor) and value.numel() == 1 else value
            for name, value in candidates.items()
        }
        agreed: dict[str, Any] = trainer.strategy.broadcast(plain)
        return agreed

    def _save_newest(self, trainer: Trainer, candidates: dict[str, Any]) -> str:
        path = self._free_path(trainer, self.format_checkpoint_name(candidates))
        self._newest[path] = trainer.global_step
        evicted: list[str] = []
        while self.save_top_k != -1 and len(self._newest) > self.save_top_k:
            oldest = min(self._newest, key=lambda p: self._newest[p])
            del self._newest[oldest]
            evicted.append(oldest)
        self.best_model_path = path
        self._print(trainer, candidates, f"saving model to {path!r}")
        self._write(trainer, path, evicted)
        return path

    def _save_scored(self, trainer: Trainer, candidates: dict[str, Any]) -> str | None:
        assert self.monitor is not None
        value = candidates.get(self.monitor)
        step = trainer.global_step
        if value is None:
            self._warn_once(
                f"monitor:{self.monitor}",
                f"ModelCheckpoint(monitor={self.monitor!r}) found no value for it at step "
                f"{step} (logged: {sorted(candidates)}); no scored checkpoint was saved. Log "
                "it with self.log, or fix the name.",
            )
            return None
        score = as_score(value)
        if torch.isnan(score):
            # A NaN never ranks: it counts as the worst possible score.
            score = torch.tensor(math.inf if self.mode == "min" else -math.inf)
        if not self._ranks(score):
            self._print(trainer, candidates, f"{self.monitor!r} was not in top {self.save_top_k}")
            return None
        self._written: str | None = None
        self._update_best_and_save(score, trainer, candidates)
        return self._written

    def _update_best_and_save(
        self, current: torch.Tensor, trainer: Trainer, monitor_candidates: dict[str, Any]
    ) -> None:
        """Enter ``current`` (a score that ranks) in the top k and save its file.

        Lightning's name for this step, which subclasses override (calling it first)
        to act on the file just written.

        Args:
            current: the monitored value, as a scalar tensor.
            trainer: the running Trainer.
            monitor_candidates: the values the file name is formatted with.
        """
        path = self._free_path(trainer, self.format_checkpoint_name(monitor_candidates))
        self.current_score = current
        self.best_k_models[path] = current
        evicted = self._evict()
        self._update_best()
        k = len(self.best_k_models) if self.save_top_k == -1 else self.save_top_k
        self._print(
            trainer,
            monitor_candidates,
            f"{self.monitor!r} reached {float(current):0.5f} (best "
            f"{float(self.best_model_score or current):0.5f}), saving model to {path!r} as "
            f"top {k}",
        )
        self._write(trainer, path, evicted)
        self._written = path

    def _write(self, trainer: Trainer, path: str, evicted: list[str]) -> None:
        # Remove first: a crash between the two steps leaves k - 1 files, never k + 1.
        for old in evicted:
            if old != path:
                self._remove_checkpoint(trainer, old)
        self._save_checkpoint(trainer, path)

    def _save_checkpoint(self, trainer: Trainer, filepath: str) -> None:
        """Write the checkpoint file ``filepath`` (every process calls it).

        Lightning's name for this step, which subclasses override to write elsewhere too.
        """
        if self.save_weights_only:
            # The full state first: every callback's on_save_checkpoint runs (the
            # non-finite check reads the losses it holds, so no file has weights
            # trained on a NaN loss; the trainkit command records its config).
            weights = without_resume_state(trainer.dump_checkpoint())
            trainer.strategy.save_checkpoint(weights, filepath)
        else:
            trainer.save_checkpoint(filepath)

    def _remove_checkpoint(self, trainer: Trainer, filepath: str) -> None:
        """Remove the checkpoint ``filepath`` that left the top k (rank 0 removes it).

        Lightning's name for this step, which subclasses override to remove more.
        """
        if trainer.is_global_zero:
            sharded.remove(filepath)

    def _save_last(self, trainer: Trainer, written: str | None, candidates: dict[str, Any]) -> None:
        if self.CHECKPOINT_NAME_LAST == LAST:
            last = self.run_last_path(trainer)
        else:
            last = self.format_checkpoint_name(candidates, filename=self.CHECKPOINT_NAME_LAST)
            last = self._free_path(trainer, last)  # another run's file is never overwritten
        previous, self.last_model_path = self.last_model_path, last
        if written is not None:
            if trainer.is_global_zero:
                link_atomic(written, last)
            trainer.strategy.barrier("last_checkpoint")
        else:
            self._write(trainer, last, [])
        if trainer.is_global_zero and self._runs_root is not None and self._root_dir is not None:
            self._point_to(
                last, os.path.join(self._root_dir, "checkpoints", os.path.basename(last))
            )
        if previous and previous != last:
            keep = set(self.best_k_models) | set(self._newest)
            if previous not in keep:
                self._remove_checkpoint(trainer, previous)

    def _point_to(self, last: str, pointer: str) -> None:
        """Make ``pointer`` a symbolic link to this run's ``last`` (where older trainkit kept it).

        A real file there (an older trainkit's ``last.ckpt``) is never replaced.
        """
        target = os.path.relpath(last, os.path.dirname(pointer))
        if os.path.lexists(pointer):
            if not os.path.islink(pointer):
                self._warn_once(
                    "pointer",
                    f"ModelCheckpoint: {pointer} is a checkpoint an earlier run wrote there; it "
                    f"is kept as it is, and this run's checkpoints are in {self.dirpath}.",
                )
                return
            if os.readlink(pointer) == target:
                return
        os.makedirs(os.path.dirname(pointer), exist_ok=True)
        temporary = os.path.join(os.path.dirname(pointer), temporary_prefix(pointer) + "link")
        with contextlib.suppress(OSError):  # no symbolic links here: no pointer
            if os.path.lexists(temporary):
                os.remove(temporary)
            os.symlink(target, temporary)
            # Atomic, not fsynced: a convenience (ckpt_path="last" reads the run folders'
            # files) the next save re-points; a power loss costs a stale link till then
            # (its folder's fsync was ~0.3-0.4 ms of every fit's first save).
            os.replace(temporary, pointer)

    def _print(self, trainer: Trainer, candidates: dict[str, Any], what: str) -> None:
        if self.verbose and trainer.is_global_zero:
            epoch, step = int(candidates["epoch"]), int(candidates["step"])
            print(f"Epoch {epoch:d}, global step {step:d}: {what}", flush=True)

    def check_monitor_top_k(self, trainer: Trainer, current: torch.Tensor | None = None) -> bool:
        """Whether a checkpoint scoring ``current`` would enter the top k.

        Args:
            trainer: the running Trainer (unused; Lightning's signature).
            current: the monitored value; None never ranks.

        Returns:
            True when it would be kept.
        """
        if current is None or self.save_top_k == 0:
            return False
        return self._ranks(as_score(current))

    def file_exists(self, filepath: str | os.PathLike[str], trainer: Trainer) -> bool:
        """Whether a checkpoint is at ``filepath``, as global rank 0 sees it, on every process.

        Only rank 0 looks; the answer is broadcast, so that every process takes
        the same decision from it (a process that saw a file another has not
        yet would otherwise go its own way and wait forever at the next save).
        A checkpoint is a file, or the folder of a sharded checkpoint whose
        save completed (a folder left by a killed save does not count).

        Args:
            filepath: the path to check.
            trainer: the running Trainer (its strategy broadcasts the answer).

        Returns:
            True when rank 0 found a checkpoint there.
        """
        found = sharded.exists(filepath) if trainer.is_global_zero else False
        return bool(trainer.strategy.broadcast(found))

    def to_yaml(self, filepath: str | os.PathLike[str] | None = None) -> None:
        """Write ``best_k_models`` (path -> score) to a YAML file.

        Args:
            filepath: where; default ``<dirpath>/best_k_models.yaml``.
        """
        if filepath is None:
            if self.dirpath is None:
                raise ValueError(
                    "ModelCheckpoint.to_yaml() needs a filepath before the folder is known "
                    "(pass dirpath=..., or call it after fit starts)."
                )
            filepath = os.path.join(self.dirpath, "best_k_models.yaml")
        write_scores(self.best_k_models, filepath)

    def _ranks(self, score: torch.Tensor) -> bool:
        if self.save_top_k == -1 or len(self.best_k_models) < self.save_top_k:
            return True
        return self._is_better(score, self._worst()[1])

    def _is_better(self, score: torch.Tensor, other: torch.Tensor) -> bool:
        return bool(score > other) if self.mode == "max" else bool(score < other)

    def _worst(self) -> tuple[str, torch.Tensor]:
        pick = min if self.mode == "max" else max
        path = pick(self.best_k_models, key=lambda p: float(self.best_k_models[p]))
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
        pick = max if self.mode == "max" else min
        self.best_model_path = pick(self.best_k_models, key=lambda p: float(self.best_k_models[p]))
        self.best_model_score = self.best_k_models[self.best_model_path]
        if self.save_top_k != -1 and len(self.best_k_models) >= self.save_top_k:
            self.kth_best_model_path, self.kth_value = self._worst()
        elif self.save_top_k == -1:
            # Keeping all: the "k-th best" is the worst kept, as every file is top k.
            self.kth_best_model_path, self.kth_value = self._worst()

    def _free_path(self, trainer: Trainer, path: str) -> str:
        """``path``, unless another run's file is there: then ``path-v1``, ``-v2``..."""
        stem = path[: -len(self.FILE_EXTENSION)]

        def versioned(version: int) -> str:
            return f"{stem}{self.CHECKPOINT_JOIN_CHAR}v{version}{self.FILE_EXTENSION}"

        ours = [*self.best_k_models, *self._newest]
        return free_path(path, ours, trainer.state.lineage, versioned, self.STARTING_VERSION)

    def _remove_future_files(self, trainer: Trainer) -> None:
        if not trainer.is_global_zero or self.dirpath is None:
            return
        last = self.run_last_path(trainer)  # this lineage's, whichever run's is newest
        keep = [last, *self.best_k_models, *self._newest]
        state = trainer.state
        remove_future_files(
            self.dirpath, keep, state.lineage, state.global_step, self.FILE_EXTENSION
        )

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """What Lightning's ModelCheckpoint stores, plus trainkit's resume bookkeeping."""
        return {
            "monitor": self.monitor,
            "best_model_score": self.best_model_score,
            "best_model_path": self.best_model_path,
            "current_score": self.current_score,
            "dirpath": self.dirpath,
            "best_k_models": dict(self.best_k_models),
            "kth_best_model_path": self.kth_best_model_path,
            "kth_value": self.kth_value,
            "last_model_path": self.last_model_path,
            "newest_models": dict(self._newest),
            "last_saved_step": self._last_saved_step,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the top-k table when the checkpoint belongs to this folder.

        From another folder only ``best_model_path`` is restored: the top-k
        table starts afresh, and nothing in the old folder is deleted.

        Args:
            state_dict: what :meth:`state_dict` returned.
        """
        if self.dirpath is None and self._runs_root is not None:
            # The run's folder is fixed when fit starts (after the logger's version
            # is restored); the table is restored then.
            self._pending_state = dict(state_dict)
            return
        if self._root_dir is None and not self._dirpath_given and state_dict.get("dirpath"):
            # Never set up in this process: the caller of a spawned run taking rank 0's
            # state (ddp_spawn). The run's folder is this callback's; a later fit
            # chooses its own again.
            self.dirpath = state_dict["dirpath"]
        self.best_model_path = state_dict.get("best_model_path", self.best_model_path)
        if state_dict.get("dirpath", self.dirpath) != self.dirpath:
            warnings.warn(
                f"ModelCheckpoint: the checkpoint's files are in {state_dict.get('dirpath')}, "
                f"this run saves to {self.dirpath}; starting a new top-k table (nothing in "
                "the old folder will be deleted). Only best_model_path is restored.",
                stacklevel=2,
            )
            return

        def score(value: Any) -> torch.Tensor | None:
            return None if value is None else as_score(value)

        self.best_k_models = {
            path: as_score(value) for path, value in state_dict.get("best_k_models", {}).items()
        }
        self.best_model_score = score(state_dict.get("best_model_score"))
        self.current_score = score(state_dict.get("current_score"))
        self.kth_best_model_path = state_dict.get("kth_best_model_path", "")
        kth = score(state_dict.get("kth_value"))
        if kth is not None:
            self.kth_value = kth
        self.last_model_path = state_dict.get("last_model_path", "")
        self._newest = dict(state_dict.get("newest_models", {}))
        self._last_saved_step = state_dict.get("last_saved_step", -1)
