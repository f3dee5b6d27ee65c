"""ProgressBar, the base of trainkit's bars, and TQDMProgressBar.

``ProgressBar`` holds what every bar shares (Lightning's base class of the same
name): enabling, the Trainer's batch totals, the metrics shown, and the
per-batch counting that decides when a redraw is due. ``TQDMProgressBar`` draws
with tqdm; ``RichProgressBar`` (``trainkit.callbacks.rich_progress``) with rich.

The bar must cost almost nothing per step (promise 1 in DESIGN.md): reading
``trainer.progress_bar_metrics`` turns device tensors into floats, a host/device
sync. So a batch-end hook only counts; the metrics are read, and the bar moved,
only when tqdm would actually redraw (at most every ``mininterval`` seconds) or
when a plain line is due.

When stdout is not a terminal (a batch job, a CI log) tqdm's carriage returns
make unreadable logs, so the bar prints one plain line every
``print_every_n_steps`` training batches instead; with ``timing=True`` (the
Trainer's default bar) each line also says the rate, the time the epoch has
taken and its ETA. Metrics appear in the same order in every line and every
run: ``loss`` first, then by name (not the order the values were first logged
in, which a resume or a change to the model's logging can alter).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Callback
from trainkit.utilities.durations import format_duration, format_rate

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

# tqdm's own default; we keep our clock in step with it so that a metrics read
# happens exactly when tqdm would draw anyway.
_DEFAULT_MININTERVAL = 0.1


def format_metrics(metrics: Mapping[str, Any]) -> dict[str, str]:
    """Format metric values with 4 significant digits: ``loss`` first, then by name.

    The order depends on the names only, so a log line's columns are the same in
    every run, whatever order the values were logged in.

    Args:
        metrics: metric name to value.

    Returns:
        Metric name to formatted value, ``"loss"`` first if present, the rest sorted.

    Example:
        >>> format_metrics({"val/acc": 0.8, "acc": 0.91234, "loss": 0.123456})
        {'loss': '0.1235', 'acc': '0.9123', 'val/acc': '0.8'}
    """
    ordered = sorted(metrics.items(), key=lambda item: (item[0] != "loss", item[0]))
    return {
        name: f"{value:.4g}" if isinstance(value, float) else str(value) for name, value in ordered
    }


def _total(counts: float | list[float]) -> int | None:
    """A tqdm ``total`` from batch counts: None when unknown (infinite)."""
    total = sum(counts) if isinstance(counts, list) else counts
    return None if math.isinf(total) else int(total)


def _sum(counts: float | list[float]) -> int | float:
    """A batch total as an int, or ``inf`` when unknown."""
    total = sum(counts) if isinstance(counts, list) else counts
    return total if math.isinf(total) else int(total)


def _join(parts: list[str], metrics: Mapping[str, str]) -> str:
    """One plain line: ``a | b | name value | name value``."""
    return " | ".join(parts + [f"{name} {value}" for name, value in metrics.items()])


def _resumed_batch(trainer: Any) -> int:
    """The batch a training epoch starts from: 0, or where a resumed epoch goes on."""
    state = getattr(trainer, "state", None)
    return int(getattr(state, "batch_idx", 0) or 0)


class _Track:
    """One bar's counting: all that a batch-end hook does until a redraw is due.

    Example:
        >>> track = _Track()
        >>> track.start(active=True)
        >>> [track.due(refresh_rate=2, mininterval=0.0) for _ in range(4)]
        [False, True, False, True]
    """

    __slots__ = ("active", "first", "last_draw", "pending", "position", "stage", "started")

    def __init__(self) -> None:
        self.active = False  # rank 0, enabled, and inside this bar's run
        self.stage = ""  # which run: "train", "sanity", "validation", "test", "predict"
        self.position = 0  # batches done
        self.first = 0  # the position it started from (a resumed epoch starts midway)
        self.pending = 0  # batches since the last draw
        self.last_draw = 0.0
        self.started = 0.0

    def start(self, active: bool, stage: str = "", position: int = 0) -> None:
        """Begin a run of this bar at ``position``."""
        self.active = active
        self.stage = stage
        self.position = self.first = position
        self.pending = 0
        self.last_draw = self.started = time.monotonic()

    def due(self, refresh_rate: int, mininterval: float) -> bool:
        """Count a batch; True when a redraw is due (every ``refresh_rate`` batches,
        at most every ``mininterval`` seconds). Only then is the clock read."""
        self.pending += 1
        if self.pending < refresh_rate:
            return False
        now = time.monotonic()
        if now - self.last_draw < mininterval:
            return False
        self.pending = 0
        self.last_draw = now
        return True

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started

    def timing(self, total: float | None) -> list[str]:
        """The rate, elapsed time and (with a known ``total``) ETA of a plain line."""
        # The rate counts the batches this process ran (not those a resume skipped).
        elapsed = self.elapsed()
        done = self.position - self.first
        parts = [format_rate(done, elapsed), f"elapsed {format_duration(elapsed)}"]
        if total is not None and not math.isinf(total) and done > 0 and elapsed > 0:
            left = max(total - self.position, 0) * elapsed / done
            parts.append(f"eta {format_duration(left)}")
        return parts


def standard_metrics(trainer: Any) -> dict[str, Any]:
    """What every bar shows before the logged values: the loggers' version as ``v_num``.

    One logger's version as it is (a long string, such as a date or a hash: its
    last 4 characters); several loggers' distinct versions joined with ``_``;
    nothing without a logger or a version.

    Args:
        trainer: the running Trainer.
    """
    versions = []
    for logger in getattr(trainer, "loggers", None) or []:
        version = getattr(logger, "version", None)
        if version not in (None, "") and version not in versions:
            versions.append(version)
    if not versions:
        return {}
    version = versions[0] if len(versions) == 1 else "_".join(map(str, versions))
    return {"v_num": version[-4:] if isinstance(version, str) else version}


class ProgressBar(Callback):
    """The base of progress bars: Lightning's ``ProgressBar``; rank 0 only.

    A subclass draws; this class keeps what every bar needs: whether it is
    enabled, the Trainer's batch totals, the metrics to show (:meth:`get_metrics`)
    and the per-batch counting (``self._train`` and ``self._eval``) that keeps a
    batch-end hook to a counter until a redraw is due. The Trainer treats any
    ProgressBar among the callbacks as *the* progress bar
    (``trainer.progress_bar_callback``) and then adds no TQDMProgressBar of its own.

    Example:
        >>> class DotBar(ProgressBar):
        ...     def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        ...         print(".", end="", flush=True)
        >>> DotBar().is_enabled
        True
    """

    def __init__(self) -> None:
        self._enabled = True
        self._trainer: Any = None
        self._train = _Track()
        self._eval = _Track()
        self._mininterval = _DEFAULT_MININTERVAL
        # The evaluation dataloader running now (see has_dataloader_changed).
        self._current_eval_dataloader_idx: int | None = None

    # ------------------------------------------------------ public state
    @property
    def is_enabled(self) -> bool:
        """Whether the bar draws (or prints) anything."""
        return self._enabled

    @property
    def is_disabled(self) -> bool:
        """Whether the bar is switched off (see :meth:`disable`)."""
        return not self.is_enabled

    def enable(self) -> None:
        """Switch the bar back on."""
        self._enabled = True

    def disable(self) -> None:
        """Switch the bar off: its hooks draw and print nothing (a rank other than 0's)."""
        self._enabled = False

    @property
    def trainer(self) -> Trainer:
        """The Trainer this bar belongs to (known from ``setup`` on)."""
        if self._trainer is None:
            raise TypeError(
                f"The progress bar {type(self).__name__} is not attached to a Trainer yet; "
                "pass it in Trainer(callbacks=[...]) and read this during a run."
            )
        return self._trainer  # type: ignore[no-any-return]

    # Lightning's descriptions of the bars: override one to rename a bar.
    @property
    def sanity_check_description(self) -> str:
        """The sanity-check bar's description."""
        return "Sanity Checking"

    @property
    def train_description(self) -> str:
        """The training bar's description before an epoch starts."""
        return "Training"

    @property
    def validation_description(self) -> str:
        """The validation bar's description."""
        return "Validation"

    @property
    def test_description(self) -> str:
        """The test bar's description."""
        return "Testing"

    @property
    def predict_description(self) -> str:
        """The predict bar's description."""
        return "Predicting"

    @property
    def total_train_batches(self) -> int | float:
        """Training batches in an epoch (``inf`` for an iterable without a length)."""
        return self.trainer.num_training_batches

    @property
    def total_val_batches(self) -> int | float:
        """Validation batches in a validation run, over every dataloader; while fitting,
        0 in an epoch that does not validate (``check_val_every_n_epoch``), as Lightning."""
        trainer = self.trainer
        every = trainer.check_val_every_n_epoch
        if (
            every is not None
            and (trainer.current_epoch + 1) % every != 0
            and trainer.state.fn == "fit"
            and not trainer.sanity_checking
        ):
            return 0
        return _sum(trainer.num_val_batches)

    @property
    def total_test_batches(self) -> int | float:
        """Test batches in a test run, over every dataloader."""
        return _sum(self.trainer.num_test_batches)

    @property
    def total_predict_batches(self) -> int | float:
        """Predict batches in a predict run, over every dataloader."""
        return _sum(self.trainer.num_predict_batches)

    @property
    def total_val_batches_current_dataloader(self) -> int | float:
        """Batches of the validation dataloader running now (``inf`` for an iterable
        without a length); during the sanity check, those the check runs from it.

        Which dataloader runs is what :meth:`has_dataloader_changed` was last
        told: trainkit's bars tell it after each batch; a bar of your own calls it
        in ``on_validation_batch_start``, as Lightning's bars do.

        Raises:
            RuntimeError: several dataloaders, and none is known to run now.
        """
        trainer = self.trainer
        counts = (
            trainer.num_sanity_val_batches if trainer.sanity_checking else trainer.num_val_batches
        )
        return self._current_dataloader_batches(counts, "validation")

    @property
    def total_test_batches_current_dataloader(self) -> int | float:
        """Batches of the test dataloader running now (``inf`` for an iterable without a length).

        See :attr:`total_val_batches_current_dataloader` for which dataloader that is.

        Raises:
            RuntimeError: several dataloaders, and none is known to run now.
        """
        return self._current_dataloader_batches(self.trainer.num_test_batches, "test")

    @property
    def total_predict_batches_current_dataloader(self) -> int | float:
        """Batches of the predict dataloader running now (``inf`` for an iterable without a length).

        See :attr:`total_val_batches_current_dataloader` for which dataloader that is.

        Raises:
            RuntimeError: several dataloaders, and none is known to run now.
        """
        return self._current_dataloader_batches(self.trainer.num_predict_batches, "predict")

    def has_dataloader_changed(self, dataloader_idx: int) -> bool:
        """Note that a batch of evaluation dataloader ``dataloader_idx`` runs; True if
        that is another dataloader than the one noted before (or the first noted).

        Call it in ``on_validation_batch_start`` (``on_test_...``, ``on_predict_...``)
        to reset a per-dataloader bar when the next dataloader starts.

        Args:
            dataloader_idx: the dataloader of the batch about to run.

        Example:
            >>> bar = ProgressBar()
            >>> [bar.has_dataloader_changed(i) for i in (0, 0, 1)]
            [True, False, True]
        """
        previous = self._current_eval_dataloader_idx
        self._current_eval_dataloader_idx = dataloader_idx
        return previous != dataloader_idx

    def reset_dataloader_idx_tracker(self) -> None:
        """Forget which evaluation dataloader runs (trainkit's bars do it as each run
        starts and ends): the next :meth:`has_dataloader_changed` returns True."""
        self._current_eval_dataloader_idx = None

    def _current_dataloader_batches(self, counts: float | list[float], stage: str) -> int | float:
        if not isinstance(counts, list):
            return _sum(counts)
        index = self._current_eval_dataloader_idx
        if index is None:
            if len(counts) != 1:
                raise RuntimeError(
                    f"{type(self).__name__}: no {stage} dataloader is known to run now (there "
                    f"are {len(counts)}). Call self.has_dataloader_changed(dataloader_idx) in "
                    f"on_{stage}_batch_start before reading the current dataloader's total."
                )
            index = 0
        return _sum(counts[index])

    @property
    def train_batch_idx(self) -> int:
        """Training batches done in the current epoch (a resumed epoch counts from its start)."""
        return self._train.position

    @property
    def val_batch_idx(self) -> int:
        """Validation (or sanity-check) batches done in the current run, over every dataloader."""
        return self._eval.position if self._eval.stage in ("sanity", "validation") else 0

    @property
    def test_batch_idx(self) -> int:
        """Test batches done in the current test run, over every dataloader."""
        return self._eval.position if self._eval.stage == "test" else 0

    @property
    def predict_batch_idx(self) -> int:
        """Predict batches done in the current predict run, over every dataloader."""
        return self._eval.position if self._eval.stage == "predict" else 0

    def get_metrics(self, trainer: Trainer, pl_module: Module) -> dict[str, Any]:
        """What the bar shows: the logger's version as ``v_num``, then ``progress_bar_metrics``.

        Override it to change what is shown (for example to drop ``v_num``).
        Reading it syncs device tensors to the host: bars call it only when they
        redraw.

        Args:
            trainer: the running Trainer.
            pl_module: the user's Module.

        Returns:
            Name to value (numbers, or a version string).
        """
        shown = standard_metrics(trainer)
        shown.update(trainer.progress_bar_metrics)
        return shown

    def print(self, *args: Any, sep: str = " ", **kwargs: Any) -> None:
        """Print a message without breaking the active bar.

        Args:
            args: what to print.
            sep: the separator between ``args``.
            kwargs: passed on to ``print`` (``end``, ``file``).
        """
        print(*args, sep=sep, **kwargs)

    # -------------------------------------------------------------- setup
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Remember the Trainer (read by :attr:`trainer` and the ``total_*`` properties).

        Args:
            trainer: the running Trainer.
            module: the user's Module.
            stage: one of "fit", "validate", "test", "predict".
        """
        self._trainer = trainer

    def __getstate__(self) -> dict[str, Any]:
        # Picklable, as Lightning's bars are: without the Trainer (the next run's setup
        # attaches it again), and without what draws (a subclass drops that).
        state = self.__dict__.copy()
        state["_trainer"] = None
        return state

    def teardown(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Close what the bar shows, also after an error."""
        self._close_display()
        self._train.active = False
        self._eval.active = False

    def on_exception(self, trainer: Trainer, module: Module, exception: BaseException) -> None:
        """Close what the bar shows, so that the traceback is not drawn over."""
        self.teardown(trainer, module, "")

    def _close_display(self) -> None:
        """Close the bars (a subclass that draws closes what it opened)."""

    # ------------------------------------------------------------ counting
    def _start_train(self, trainer: Trainer) -> bool:
        """Begin counting a training epoch; False where this bar shows nothing."""
        # A resumed epoch goes on from the batch the checkpoint was saved after.
        self._train.start(
            trainer.is_global_zero and self.is_enabled, "train", _resumed_batch(trainer)
        )
        return self._train.active

    def _start_eval_count(self, trainer: Trainer, stage: str) -> bool:
        """Begin counting an evaluation run; False where this bar shows nothing."""
        self.reset_dataloader_idx_tracker()
        self._eval.start(trainer.is_global_zero and self.is_enabled, stage)
        return self._eval.active


#: The methods that build the bars (a subclass that overrides one draws its own).
_INIT_BARS = tuple(
    f"init_{kind}_tqdm" for kind in ("train", "sanity", "validation", "test", "predict")
)


class TQDMProgressBar(ProgressBar):
    """Progress bars for training, validation, test and predict; rank 0 only.

    Args:
        refresh_rate: redraw at most every this many batches (and, on top of that,
            at most every tqdm ``mininterval``, 0.1 s). Must be at least 1. The
            ``TQDM_MINITERS`` environment variable, when larger, wins (as in Lightning).
        process_position: the terminal line of the first bar (bars below other
            programs' bars).
        leave: keep one finished bar per epoch on screen. When False one training
            bar is reused across epochs and stays after the last one.
        print_every_n_steps: in plain mode (stdout not a terminal), print a line
            every this many training batches. Must be at least 1.
        plain: force plain-line mode (True) or bars (False); None decides once, at
            setup: bars in a terminal, or when a subclass builds its own (overrides
            an ``init_*_tqdm``), else plain lines.
        timing: in plain mode, add the rate (``it/s``), the time the epoch (or the
            evaluation) has taken and, when the epoch's length is known, its ETA
            to each line. The Trainer's own bar turns it on; it is off here so
            that a bar built by hand keeps the line format of earlier trainkit
            versions, which log parsers may rely on. Bars in a terminal always
            show these (tqdm draws them).

    Example:
        >>> bar = TQDMProgressBar(print_every_n_steps=100, timing=True)
        >>> # plain lines then read, e.g.:
        >>> # epoch 0 | step 100/469 | 52.1 it/s | elapsed 1.9s | eta 7.1s | loss 0.2345
    """

    #: tqdm's ``bar_format`` of every bar, as Lightning documents it (the rate
    #: always in it/s); a subclass may set its own.
    BAR_FORMAT = (
        "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"
    )

    def __init__(
        self,
        refresh_rate: int = 1,
        process_position: int = 0,
        leave: bool = False,
        print_every_n_steps: int = 50,
        plain: bool | None = None,
        timing: bool = False,
    ) -> None:
        if refresh_rate < 1:
            raise ValueError(
                f"TQDMProgressBar(refresh_rate={refresh_rate}) must be at least 1; "
                "to hide the progress bar, leave the callback out instead."
            )
        if print_every_n_steps < 1:
            raise ValueError(
                f"TQDMProgressBar(print_every_n_steps={print_every_n_steps}) must be at least 1."
            )
        super().__init__()
        miniters = os.environ.get("TQDM_MINITERS", "").strip()
        self._refresh_rate = (
            max(refresh_rate, int(miniters)) if miniters.isdigit() else refresh_rate
        )
        self.print_every_n_steps = print_every_n_steps
        self.leave = leave
        self.timing = timing
        self._process_position = process_position
        self._plain_override = plain
        self._plain: bool | None = None
        self._train_bar: Any = None
        self._eval_bar: Any = None
        self._eval_stage = ""  # whose bar _eval_bar is: "validation" (also the sanity
        # check's), "test" or "predict"
        # The last bar of each stage, closed: readable after its stage, as in Lightning.
        self._closed: dict[str, Any] = {}

    # ------------------------------------------------------ public state
    @property
    def refresh_rate(self) -> int:
        """Redraw at most every this many batches (and at most every 0.1 s)."""
        return self._refresh_rate

    @property
    def process_position(self) -> int:
        """The terminal line of the first bar."""
        return self._process_position

    @property
    def train_progress_bar(self) -> Any:
        """The tqdm bar of training (while training runs, then the closed last one; in plain
        mode one that never draws)."""
        return self._bar(self._train_bar, "train")

    @property
    def val_progress_bar(self) -> Any:
        """The tqdm bar of validation or the sanity check (while it runs, then the closed last
        one; in plain mode one that never draws)."""
        return self._bar(self._eval_bar, "validation")

    @property
    def test_progress_bar(self) -> Any:
        """The tqdm bar of testing (while it runs, then the closed last one; in plain mode one
        that never draws)."""
        return self._bar(self._eval_bar, "test")

    @property
    def predict_progress_bar(self) -> Any:
        """The tqdm bar of prediction (while it runs, then the closed last one; in plain mode
        one that never draws)."""
        return self._bar(self._eval_bar, "predict")

    def _bar(self, bar: Any, stage: str) -> Any:
        if stage != "train" and self._eval_stage != stage:
            bar = None  # another stage's bar is running
        if bar is None:
            bar = self._closed.get(stage)
        if bar is None:
            raise TypeError(
                f"The {type(self).__name__} {stage} bar has not been created yet; "
                "read it while that stage runs, or after."
            )
        return bar

    def print(self, *args: Any, sep: str = " ", **kwargs: Any) -> None:
        """Print a message without breaking the active bar.

        Args:
            args: what to print.
            sep: the separator between ``args``.
            kwargs: passed on to ``tqdm.write``/``print`` (``end``, ``file``).
        """
        if self._eval_bar is None and self._train_bar is None:
            super().print(*args, sep=sep, **kwargs)
            return
        from tqdm.auto import tqdm

        tqdm.write(sep.join(map(str, args)), **kwargs)

    # ------------------------------------------------------------ helpers
    @property
    def is_plain(self) -> bool:
        """Whether this bar prints plain lines instead of drawing tqdm bars: when stdout is
        not a terminal, unless a subclass builds bars of its own (overrides an
        ``init_*_tqdm``), which then draw as they would under Lightning."""
        if self._plain is None:
            self._plain = (
                not sys.stdout.isatty() and not self._own_bars()
                if self._plain_override is None
                else self._plain_override
            )
        return self._plain

    def _own_bars(self) -> bool:
        # Whether a class outside trainkit defines one of the init_*_tqdm methods.
        return any(
            not getattr(type(self), name).__module__.startswith("trainkit.") for name in _INIT_BARS
        )

    def _new_bar(self, desc: str, total: int | None, position: int, leave: bool) -> Any:
        # Imported here: `import trainkit` stays cheap.
        from tqdm.auto import tqdm

        bar = tqdm(
            desc=desc,
            total=total,
            position=position + self._process_position,
            leave=leave,
            dynamic_ncols=True,
            file=sys.stdout,
            bar_format=self.BAR_FORMAT,
            # In plain mode the bars exist (a subclass's init_*_tqdm runs and it may
            # read them, as under Lightning) but never draw: the plain lines show progress.
            disable=bool(self.is_plain),
        )
        self._mininterval = float(getattr(bar, "mininterval", _DEFAULT_MININTERVAL))
        return bar

    @staticmethod
    def _draw(bar: Any, position: int, metrics: Mapping[str, Any] | None) -> None:
        # Setting n and refreshing once draws exactly one frame; bar.update() would
        # apply tqdm's own throttle a second time and might skip this frame.
        if metrics is not None:
            bar.set_postfix(ordered_dict=format_metrics(metrics), refresh=False)
        bar.n = position
        bar.refresh()

    def _close_train_bar(self) -> None:
        if self._train_bar is not None:
            self._train_bar.close()
            self._closed["train"], self._train_bar = self._train_bar, None

    def _close_eval_bar(self) -> None:
        if self._eval_bar is not None:
            self._eval_bar.close()
            self._closed[self._eval_stage], self._eval_bar = self._eval_bar, None

    # -------------------------------------------------------------- setup
    def setup(self, trainer: Trainer, module: Module, stage: str) -> None:
        """Decide once between bars and plain lines.

        Args:
            trainer: the running Trainer.
            module: the user's Module.
            stage: one of "fit", "validate", "test", "predict".
        """
        super().setup(trainer, module, stage)
        self._plain = None
        _ = self.is_plain

    def _close_display(self) -> None:
        self._close_eval_bar()
        self._close_train_bar()

    # ----------------------------------------------------------- training
    def on_train_start(self, trainer: Trainer, *_: Any) -> None:
        """Create the training bar (where this process shows one), as Lightning's does here.

        A subclass whose ``on_train_epoch_start`` reads ``train_progress_bar``
        without calling this class's finds it made.
        """
        if trainer.is_global_zero and self.is_enabled and self._train_bar is None:
            self._train_bar = self.init_train_tqdm()

    def on_train_epoch_start(self, trainer: Trainer, *_: Any) -> None:
        """Start (or reset) the training bar for this epoch."""
        if not self._start_train(trainer):
            return
        total = _total(trainer.num_training_batches)
        desc = f"Epoch {trainer.current_epoch}"
        if self._train_bar is None:
            # With leave=False one bar lives across epochs, like Lightning's default.
            self._train_bar = self.init_train_tqdm()
        self._train_bar.reset(total=total)
        self._train_bar.set_description(desc, refresh=False)

    def on_train_batch_end(
        self, trainer: Trainer, module: Module, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Count the batch; read metrics and redraw only when a frame is due."""
        if not self._train.active:
            return
        # batch_idx, not a counter: after a mid-epoch resume the bar still ends at total.
        self._train.position = batch_idx + 1
        if self._plain:  # resolved at epoch start
            if self._train.position % self.print_every_n_steps == 0:
                self._print_train_line(trainer, module)
            return
        if self._train.due(self._refresh_rate, self._mininterval):
            self._draw(self._train_bar, self._train.position, self.get_metrics(trainer, module))

    def _print_train_line(self, trainer: Trainer, module: Module) -> None:
        total = trainer.num_training_batches
        step = f"step {self._train.position}"
        if not math.isinf(total):
            step += f"/{int(total)}"
        parts = [f"epoch {trainer.current_epoch}", step, *self._train_timing(total)]
        print(_join(parts, format_metrics(self.get_metrics(trainer, module))), flush=True)

    def _train_timing(self, total: float | None) -> list[str]:
        return self._train.timing(total) if self.timing else []

    def _eval_timing(self) -> list[str]:
        return self._eval.timing(None) if self.timing else []

    def on_train_epoch_end(self, trainer: Trainer, module: Module) -> None:
        """Bring the bar to its final count with the epoch's final metrics."""
        if not self._train.active:
            return
        self._train.active = False
        metrics = self.get_metrics(trainer, module)
        if self.is_plain:
            parts = [f"epoch {trainer.current_epoch}", f"end ({self._train.position} batches)"]
            parts += self._train_timing(None)
            print(_join(parts, format_metrics(metrics)), flush=True)
            _count(self._train_bar, self._train.position)
            return
        self._draw(self._train_bar, self._train.position, metrics)
        if self.leave:
            self._close_train_bar()

    def on_train_end(self, *_: Any) -> None:
        """Close the training bar."""
        self._close_train_bar()

    # --------------------------------------------------------- evaluation
    def _start_eval(self, trainer: Trainer, stage: str, counts: list[float]) -> None:
        if not self._start_eval_count(trainer, stage):
            return
        self._close_eval_bar()
        factories = {
            "sanity": self.init_sanity_tqdm,
            "validation": self.init_validation_tqdm,
            "test": self.init_test_tqdm,
            "predict": self.init_predict_tqdm,
        }
        # The sanity check's bar is val_progress_bar's, as in Lightning.
        self._eval_bar = factories[stage]()
        self._eval_stage = "validation" if stage == "sanity" else stage
        self._eval_bar.reset(total=_total(counts))

    # The bars' factories: override one to change how that bar looks (Lightning's names).
    def init_train_tqdm(self) -> Any:
        """A new training bar (kept across epochs; its total is set each epoch)."""
        return self._new_bar(self.train_description, None, position=0, leave=True)

    def init_sanity_tqdm(self) -> Any:
        """A new sanity-check bar; it is cleared from the screen when the check ends."""
        placement = self._eval_placement()
        # Its results are not real metrics: nothing of it stays (Lightning's leave=False).
        return self._new_bar(
            self.sanity_check_description, None, position=placement["position"], leave=False
        )

    def init_validation_tqdm(self) -> Any:
        """A new validation bar (below the training bar, gone when done, while fitting)."""
        return self._new_bar(self.validation_description, None, **self._eval_placement())

    def init_test_tqdm(self) -> Any:
        """A new test bar."""
        return self._new_bar(self.test_description, None, **self._eval_placement())

    def init_predict_tqdm(self) -> Any:
        """A new predict bar."""
        return self._new_bar(self.predict_description, None, **self._eval_placement())

    def _eval_placement(self) -> dict[str, Any]:
        # Nested under the training bar it disappears when done; alone it stays.
        nested = self._train_bar is not None
        return {"position": 1 if nested else 0, "leave": not nested}

    def _eval_batch_end(self, dataloader_idx: int) -> None:
        self._current_eval_dataloader_idx = dataloader_idx
        if not self._eval.active:
            return
        # A counter, not batch_idx: batch_idx restarts for each dataloader.
        self._eval.position += 1
        if self._plain:  # resolved at evaluation start
            return
        if self._eval.due(self._refresh_rate, self._mininterval):
            self._draw(self._eval_bar, self._eval.position, None)

    def _end_eval(self, trainer: Trainer, module: Module, label: str, show_metrics: bool) -> None:
        self.reset_dataloader_idx_tracker()
        if not self._eval.active:
            return
        self._eval.active = False
        if self.is_plain:
            if show_metrics:
                metrics = self.get_metrics(trainer, module)
                # "loss" is the latest training loss, not an evaluation result.
                metrics.pop("loss", None)
                print(_join([label, *self._eval_timing()], format_metrics(metrics)), flush=True)
            else:
                parts = [label, f"{self._eval.position} batches", *self._eval_timing()]
                print(_join(parts, {}), flush=True)
            _count(self._eval_bar, self._eval.position)
            self._close_eval_bar()
            return
        self._draw(self._eval_bar, self._eval.position, None)
        self._close_eval_bar()

    def on_validation_start(self, trainer: Trainer, module: Module) -> None:
        """Start the validation (or sanity-check) bar."""
        if trainer.sanity_checking:
            stage = "sanity"
        else:
            stage = "validation"
            if self._train.active and not self.is_plain:
                # Show the full epoch on the training bar while validation runs.
                self._draw(self._train_bar, self._train.position, self.get_metrics(trainer, module))
        self._start_eval(trainer, stage, trainer.num_val_batches)

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Count the batch; redraw when a frame is due."""
        self._eval_batch_end(dataloader_idx)

    def on_validation_end(self, trainer: Trainer, module: Module) -> None:
        """Close the validation bar; show the validation metrics."""
        if trainer.sanity_checking:
            if self.is_plain:
                # Sanity-check results are not real metrics; a log line would mislead.
                self._eval.active = False
            self._end_eval(trainer, module, "sanity check", show_metrics=False)
            return
        label = f"validation | epoch {trainer.current_epoch}"
        self._end_eval(trainer, module, label, show_metrics=True)
        if self._train_bar is not None and not self.is_plain:
            self._train_bar.set_postfix(
                ordered_dict=format_metrics(self.get_metrics(trainer, module)), refresh=True
            )

    def on_test_start(self, trainer: Trainer, module: Module) -> None:
        """Start the test bar."""
        self._start_eval(trainer, "test", trainer.num_test_batches)

    def on_test_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Count the batch; redraw when a frame is due."""
        self._eval_batch_end(dataloader_idx)

    def on_test_end(self, trainer: Trainer, module: Module) -> None:
        """Close the test bar; in plain mode print the test metrics."""
        self._end_eval(trainer, module, "test", show_metrics=True)

    def on_predict_start(self, trainer: Trainer, module: Module) -> None:
        """Start the predict bar."""
        self._start_eval(trainer, "predict", trainer.num_predict_batches)

    def on_predict_batch_end(
        self,
        trainer: Trainer,
        module: Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Count the batch; redraw when a frame is due."""
        self._eval_batch_end(dataloader_idx)

    def on_predict_end(self, trainer: Trainer, module: Module) -> None:
        """Close the predict bar; in plain mode print how many batches ran."""
        self._end_eval(trainer, module, "predict", show_metrics=False)


def _count(bar: Any, position: int) -> None:
    """Set a plain-mode (never drawn) bar's count, for code that reads it."""
    if bar is not None:
        bar.n = position
