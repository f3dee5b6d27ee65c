"""Profilers: where a run's time goes, by hook, step and data fetch.

``Trainer(profiler="simple" | "advanced" | "pytorch" | Profiler(...))`` times every
hook the run calls (``[Callback]Name.hook``, ``[Module]Name.hook``), the step
functions (``[Strategy]Name.training_step``, ...), each whole training batch
(``run_training_batch``) and each fetch of a training batch
(``train_dataloader_next``). When a run (fit, validate, test, predict) ends, the
profiler's report is printed by local rank 0, or, when the profiler has a ``filename``,
written by each process to ``<dirpath>/<stage>-<filename>[-<local rank>].txt``
(``dirpath`` defaults to the Trainer's ``log_dir``). Without a profiler nothing is
wrapped, so an unprofiled run pays nothing.

The classes follow Lightning's ``lightning.pytorch.profilers``: ``start``/``stop``/
``profile(action)``, ``summary()``, ``describe()``; the reports are laid out by
trainkit.
"""

from __future__ import annotations

import cProfile
import functools
import inspect
import io
import os
import pstats
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from trainkit.utilities.messages import did_you_mean

if TYPE_CHECKING:
    from torch import nn
    from torch.utils.hooks import RemovableHandle

__all__ = [
    "AdvancedProfiler",
    "PassThroughProfiler",
    "Profiler",
    "PyTorchProfiler",
    "RegisterRecordFunction",
    "SimpleProfiler",
    "build_profiler",
]


class Profiler:
    """The interface: time named actions, then report on them.

    Args:
        dirpath: where ``describe`` writes the report (None: the Trainer's ``log_dir``).
        filename: the report's file name stem; None prints the report (rank 0) instead.
    """

    def __init__(
        self, dirpath: str | os.PathLike[str] | None = None, filename: str | None = None
    ) -> None:
        self.dirpath = dirpath
        self.filename = filename
        self._stage: str | None = None
        self._local_rank: int | None = None
        #: The Module of the current run; the Trainer sets it before :meth:`setup`.
        self.module: nn.Module | None = None

    @property
    def local_rank(self) -> int:
        """The local rank :meth:`setup` was given; 0 before it, and in a run of one process.

        Example:
            >>> profiler = SimpleProfiler()
            >>> profiler.local_rank
            0
            >>> profiler.setup("fit", local_rank=1)
            >>> profiler.local_rank
            1
        """
        return 0 if self._local_rank is None else self._local_rank

    def start(self, action_name: str) -> None:
        """Start timing ``action_name``."""

    def stop(self, action_name: str) -> None:
        """Stop timing ``action_name``."""

    def summary(self) -> str:
        """The report on what was timed so far."""
        return ""

    @contextmanager
    def profile(self, action_name: str) -> Iterator[str]:
        """Time the ``with`` block as ``action_name``.

        Example:
            >>> profiler = SimpleProfiler()
            >>> with profiler.profile("load"):
            ...     pass
            >>> len(profiler.recorded_durations["load"])
            1
        """
        self.start(action_name)
        try:
            yield action_name
        finally:
            self.stop(action_name)

    def setup(
        self,
        stage: str,
        local_rank: int | None = None,
        log_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """Called by the Trainer when a run starts.

        Args:
            stage: "fit", "validate", "test" or "predict".
            local_rank: this process's local rank when there are several (else None);
                the report is printed where it is None or 0 (:attr:`local_rank` reads it).
            log_dir: the Trainer's ``log_dir``, used when ``dirpath`` is None.
        """
        self._stage, self._local_rank = stage, local_rank
        if self.dirpath is None:
            self.dirpath = log_dir
        self._start_run()

    def _start_run(self) -> None:
        """A new run starts: forget the last one's results (what subclasses keep)."""

    def describe(self) -> None:
        """Print the report (local rank 0), or write it to its file (every process)."""
        report = self.summary()
        if not report:
            return
        if self.filename is None:
            if self._local_rank in (None, 0):
                print(report, flush=True)
            return
        path = self.report_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(report + "\n")

    def report_path(self, extension: str = ".txt") -> Path:
        """``<dirpath>/<stage>-<filename>[-<local rank>]<extension>``."""
        parts = [part for part in (self._stage, self.filename) if part]
        if self._local_rank is not None:
            parts.append(str(self._local_rank))
        return Path(self.dirpath or ".") / ("-".join(parts) + extension)

    def teardown(self, stage: str | None) -> None:
        """Called by the Trainer when a run ends, after :meth:`describe` (the results
        stay readable until the next run's :meth:`setup`)."""


class PassThroughProfiler(Profiler):
    """Times nothing (what the Trainer holds without a profiler)."""


class SimpleProfiler(Profiler):
    """Wall-clock time of every action: calls, mean, total and share of the run.

    Args:
        dirpath: see :class:`Profiler`.
        filename: see :class:`Profiler`.
        extended: also show the run's total time and each action's percentage of it.
    """

    def __init__(
        self,
        dirpath: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        extended: bool = True,
    ) -> None:
        super().__init__(dirpath, filename)
        self.extended = extended
        self.current_actions: dict[str, float] = {}
        self.recorded_durations: dict[str, list[float]] = {}
        self.start_time = time.monotonic()
        self._end_time: float | None = None

    def _start_run(self) -> None:
        self.current_actions.clear()
        self.recorded_durations.clear()  # each run reports its own actions
        self.start_time, self._end_time = time.monotonic(), None

    def start(self, action_name: str) -> None:
        if action_name in self.current_actions:
            raise _already_started(action_name)
        self.current_actions[action_name] = time.monotonic()

    def stop(self, action_name: str) -> None:
        started = self.current_actions.pop(action_name, None)
        if started is None:
            raise _never_started(action_name)
        self.recorded_durations.setdefault(action_name, []).append(time.monotonic() - started)

    def summary(self) -> str:
        if not self.recorded_durations:
            return ""
        total = (self._end_time or time.monotonic()) - self.start_time
        rows = sorted(
            ((name, sum(d), len(d)) for name, d in self.recorded_durations.items()),
            key=lambda row: row[1],
            reverse=True,
        )
        width = max(len("Action"), *(len(name) for name, _, _ in rows))
        columns = ["Mean duration (s)", "Num calls", "Total time (s)"]
        columns += ["Percentage %"] if self.extended else []
        header = " | ".join([f"{'Action':<{width}}", *columns])

        def row(name: str, *values: str) -> str:
            # Without the percentage column, its value (the last) is left out.
            pairs = zip(columns, values, strict=False)
            cells = [f"{value:>{len(column)}}" for column, value in pairs]
            return " | ".join([f"{name:<{width}}", *cells])

        lines = [f"{_stage_title(self._stage)} Profiler Report", header, "-" * len(header)]
        if self.extended:
            lines.append(row("Total", "-", "-", f"{total:.5f}", "100 %"))
        for name, spent, calls in rows:
            share = f"{100 * spent / total if total > 0 else 0.0:.1f} %"
            lines.append(row(name, f"{spent / calls:.5f}", str(calls), f"{spent:.5f}", share))
        return "\n".join(lines)

    def teardown(self, stage: str | None) -> None:
        # The durations stay readable (recorded_durations, summary()) until the next run.
        super().teardown(stage)
        self.current_actions.clear()
        self._end_time = time.monotonic()


class AdvancedProfiler(Profiler):
    """``cProfile`` statistics per action: the functions each action spent its time in.

    One ``cProfile`` profiler runs at a time (Python allows no more): an action
    started inside another pauses the outer one's until it stops, so each
    function call is counted in the innermost action running it.

    Args:
        dirpath: see :class:`Profiler`.
        filename: see :class:`Profiler`.
        line_count_restriction: how many functions each action lists (an int), or
            the fraction of them (a float in (0, 1]), sorted by cumulative time.
        dump_stats: also write each action's raw statistics (``pstats`` format) to
            ``<dirpath>/<stage>-<filename>[-<local rank>]-<action>.prof``.
    """

    def __init__(
        self,
        dirpath: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        line_count_restriction: float = 1.0,
        dump_stats: bool = False,
    ) -> None:
        super().__init__(dirpath, filename)
        self.line_count_restriction = line_count_restriction
        self.dump_stats = dump_stats
        self.profiled_actions: dict[str, cProfile.Profile] = {}
        self._running: list[str] = []

    def _start_run(self) -> None:
        self.profiled_actions.clear()  # each run reports its own actions

    def start(self, action_name: str) -> None:
        if action_name in self._running:
            raise _already_started(action_name)
        if self._running:
            self.profiled_actions[self._running[-1]].disable()
        profiler = self.profiled_actions.get(action_name)
        if profiler is None:
            profiler = self.profiled_actions[action_name] = cProfile.Profile()
        self._running.append(action_name)
        profiler.enable()

    def stop(self, action_name: str) -> None:
        if action_name not in self._running:
            raise _never_started(action_name)
        self.profiled_actions[action_name].disable()
        self._running.remove(action_name)
        if self._running:  # the outer action goes on
            self.profiled_actions[self._running[-1]].enable()

    def summary(self) -> str:
        reports = []
        for name, profiler in self.profiled_actions.items():
            stream = io.StringIO()
            try:
                stats = pstats.Stats(profiler, stream=stream).strip_dirs()
            except TypeError:  # nothing was recorded for it
                continue
            stats.sort_stats("cumulative").print_stats(self.line_count_restriction)
            reports.append(f"Profile stats for: {name}\n{stream.getvalue()}")
            if self.dump_stats:
                path = self.report_path(f"-{_safe_name(name)}.prof")
                path.parent.mkdir(parents=True, exist_ok=True)
                profiler.dump_stats(path)
        if not reports:
            return ""
        return f"{_stage_title(self._stage)} Profiler Report\n\n" + "\n".join(reports)

    def teardown(self, stage: str | None) -> None:
        for name in reversed(self._running):
            self.profiled_actions[name].disable()
        self._running.clear()
        super().teardown(stage)  # the statistics stay readable until the next run


def _stage_title(stage: str | None) -> str:
    return (stage or "run").upper()


def _safe_name(action: str) -> str:
    # An action's name as part of a file name on any platform.
    return re.sub(r"_+", "_", re.sub(r"[\\/:*?\"<>|\s\[\]]", "_", action)).strip("_")


class RegisterRecordFunction:
    """Record each submodule's ``forward`` as a named range while the block runs.

    Every submodule of ``model`` (the model itself left out) gets a forward
    pre-hook and a forward hook that open and close a ``record_function`` range
    named ``[nn.Module]<class's module>.<class>: <attribute path>``, e.g.
    ``[nn.Module]torch.nn.modules.linear.Linear: encoder.0``. Under a running
    ``torch.profiler`` the ranges show in its table and trace; under
    ``torch.autograd.profiler.emit_nvtx`` they are NVTX ranges. Leaving the block
    removes the hooks. :class:`PyTorchProfiler` does this for the run's Module
    (``record_module_names=True``).

    Args:
        model: the module whose submodules are recorded.

    Example:
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2))
        >>> with torch.profiler.profile() as prof, RegisterRecordFunction(model):
        ...     _ = model(torch.ones(1, 2))
        >>> "[nn.Module]torch.nn.modules.linear.Linear: 0" in {e.key for e in prof.key_averages()}
        True
    """

    def __init__(self, model: nn.Module) -> None:
        self._model = model
        self._handles: list[RemovableHandle] = []
        self._open = threading.local()  # per thread: DataParallel runs replicas in threads

    def _records(self) -> list[tuple[str, Any]]:
        records: list[tuple[str, Any]] | None = getattr(self._open, "records", None)
        if records is None:
            records = self._open.records = []
        return records

    def _start(self, module: nn.Module, args: Any, *, name: str) -> None:
        import torch

        record: Any = torch.profiler.record_function(name)
        record.__enter__()
        self._records().append((name, record))

    def _stop(self, module: nn.Module, args: Any, output: Any, *, name: str) -> None:
        records = self._records()
        for index in range(len(records) - 1, -1, -1):
            if records[index][0] == name:
                records.pop(index)[1].__exit__(None, None, None)
                return

    def __enter__(self) -> None:
        for path, module in self._model.named_modules():
            if not path:  # the model itself: its hooks are the run's actions
                continue
            name = f"[nn.Module]{type(module).__module__}.{type(module).__name__}: {path}"
            self._handles.append(
                module.register_forward_pre_hook(functools.partial(self._start, name=name))
            )
            # always_call: a forward that raises still closes its range.
            stop = functools.partial(self._stop, name=name)
            self._handles.append(module.register_forward_hook(stop, always_call=True))

    def __exit__(self, *exc_info: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        records = self._records()
        while records:  # ranges a forward left open in this thread
            records.pop()[1].__exit__(None, None, None)


class PyTorchProfiler(Profiler):
    """``torch.profiler`` over the whole run, each action a ``record_function`` range.

    The report is torch's operator table (``key_averages``); with
    ``export_to_chrome`` each process also writes one Chrome trace of the run,
    ``<dirpath>/<stage>-<filename>[-<local rank>].pt.trace.json`` (open it in
    ``chrome://tracing`` or Perfetto). Lightning writes a trace per action instead.
    With ``record_module_names`` each submodule's ``forward`` is a range too
    (see :class:`RegisterRecordFunction`).

    With ``emit_nvtx=True`` the run is recorded as NVTX ranges for NVIDIA Nsight
    Systems instead (``torch.autograd.profiler.emit_nvtx`` inside
    ``torch.cuda.profiler.profile``, which also starts and stops the CUDA
    profiler around the run): ``nsys profile --capture-range=cudaProfilerApi
    python train.py``. The timeline is nsys's: there is no table (nothing is
    printed or written) and no Chrome trace. It needs a CUDA GPU: the profiler
    is built anywhere, but starting it where ``torch.cuda.is_available()`` is
    False raises a RuntimeError.

    Args:
        dirpath: see :class:`Profiler`.
        filename: see :class:`Profiler` (the trace is written only with a filename).
        group_by_input_shapes: one row per operator and input shapes (records shapes).
        emit_nvtx: record NVTX ranges for nsys instead of torch.profiler's table and trace.
        export_to_chrome: write the Chrome trace.
        row_limit: rows in the operator table (-1: all).
        sort_by_key: the table's sort column, one of :attr:`AVAILABLE_SORT_KEYS`
            (default ``"cpu_time_total"``; on a GPU, ``"device_time_total"`` or
            ``"cuda_time_total"`` sorts by time on the device).
        record_module_names: record each submodule's ``forward`` of the run's Module
            as a range named after its class and attribute path.
        table_kwargs: more keyword arguments for the table, ``key_averages().table``'s
            other than ``sort_by`` and ``row_limit`` (e.g. ``max_name_column_width``,
            ``top_level_events_only``, ``time_unit``).
        **profiler_kwargs: passed to ``torch.profiler.profile`` (``activities``,
            ``record_shapes``, ``profile_memory``, ``with_stack``, ...); with
            ``emit_nvtx``, only ``record_shapes`` (passed to ``emit_nvtx``).

    Raises:
        ValueError: ``sort_by_key`` is not in :attr:`AVAILABLE_SORT_KEYS`; a
            ``table_kwargs`` key is not one the table takes (the error is a KeyError
            too); a profiler argument is not taken, or is a step schedule.
    """

    AVAILABLE_SORT_KEYS: ClassVar[frozenset[str]] = frozenset(
        {
            "cpu_time",
            "cuda_time",
            "cpu_time_total",
            "cuda_time_total",
            "cpu_memory_usage",
            "cuda_memory_usage",
            "self_cpu_memory_usage",
            "self_cuda_memory_usage",
            "count",
            # torch's names for the device columns, and the self times.
            "device_time",
            "device_time_total",
            "self_cpu_time_total",
            "self_cuda_time_total",
            "self_device_time_total",
            "device_memory_usage",
            "self_device_memory_usage",
            "flops",
        }
    )
    """The columns the table can be sorted by (``sort_by_key``): Lightning's nine
    (``cpu_time``, ``cuda_time``, ``cpu_time_total``, ``cuda_time_total``,
    ``cpu_memory_usage``, ``cuda_memory_usage``, ``self_cpu_memory_usage``,
    ``self_cuda_memory_usage``, ``count``), torch's ``device_*`` names for the
    ``cuda_*`` ones, the self times and ``flops``."""

    STEP_FUNCTIONS: ClassVar[frozenset[str]] = frozenset(
        {"training_step", "validation_step", "test_step", "predict_step"}
    )
    """The step functions: the actions ``[Strategy]<class>.<step function>`` are the
    run's steps. The profiler records the whole run and steps no schedule on them."""

    def __init__(
        self,
        dirpath: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        group_by_input_shapes: bool = False,
        emit_nvtx: bool = False,
        export_to_chrome: bool = True,
        row_limit: int = 20,
        sort_by_key: str | None = None,
        record_module_names: bool = True,
        table_kwargs: dict[str, Any] | None = None,
        **profiler_kwargs: Any,
    ) -> None:
        super().__init__(dirpath, filename)
        if sort_by_key is not None and sort_by_key not in self.AVAILABLE_SORT_KEYS:
            raise ValueError(
                f"PyTorchProfiler(sort_by_key={sort_by_key!r}) is not a column the table "
                f"sorts by; use one of {', '.join(sorted(self.AVAILABLE_SORT_KEYS))}."
                + did_you_mean(sort_by_key, self.AVAILABLE_SORT_KEYS)
            )
        self.table_kwargs = _checked_table_kwargs(table_kwargs or {})
        _check_torch_profiler_arguments(profiler_kwargs, emit_nvtx)
        self.group_by_input_shapes = group_by_input_shapes
        self.emit_nvtx = emit_nvtx
        self.export_to_chrome = export_to_chrome
        self.row_limit = row_limit
        self.sort_by_key = sort_by_key
        self.record_module_names = record_module_names
        if group_by_input_shapes:
            profiler_kwargs.setdefault("record_shapes", True)
        self.profiler_kwargs = profiler_kwargs
        self._session: ExitStack | None = None  # the profilers (and hooks) of the run
        self._profiler: Any = None  # the torch.profiler.profile (None with emit_nvtx)
        self._ranges: dict[str, Any] = {}
        self._table = ""
        #: torch's events of the last run (its ``EventList``; None before one, and with
        #: ``emit_nvtx``), as Lightning's attribute of this name holds them.
        self.function_events: Any = None

    def start(self, action_name: str) -> None:
        import torch

        if self._session is None:
            self._session = self._open_session()
        if action_name in self._ranges:
            raise _already_started(action_name)
        record: Any = torch.profiler.record_function(action_name)
        record.__enter__()
        self._ranges[action_name] = record

    def _open_session(self) -> ExitStack:
        # The profilers of one run (entered at its first action), and the module hooks.
        import torch

        with ExitStack() as session:
            if self.emit_nvtx:
                if not torch.cuda.is_available():
                    raise RuntimeError(
                        "PyTorchProfiler(emit_nvtx=True) records NVTX ranges for NVIDIA "
                        "Nsight Systems, which needs a CUDA GPU, and torch.cuda.is_available() "
                        "is False here. Run on a GPU machine, or leave emit_nvtx out to get "
                        "torch.profiler's table and trace."
                    )
                session.enter_context(torch.cuda.profiler.profile())
                # Called by its path: jsonargparse (LightningCLI) follows profiler_kwargs
                # here and takes emit_nvtx's other argument (record_shapes) as the profiler's.
                nvtx = torch.autograd.profiler.emit_nvtx(enabled=True, **self.profiler_kwargs)  # type: ignore[no-untyped-call]
                session.enter_context(nvtx)
            else:
                activities = [torch.profiler.ProfilerActivity.CPU]
                if torch.cuda.is_available():
                    activities.append(torch.profiler.ProfilerActivity.CUDA)
                kwargs = {"activities": activities, **self.profiler_kwargs}
                self._profiler = session.enter_context(torch.profiler.profile(**kwargs))
            if self.record_module_names and self.module is not None:
                session.enter_context(RegisterRecordFunction(self.module))
            return session.pop_all()

    def stop(self, action_name: str) -> None:
        record = self._ranges.pop(action_name, None)
        if record is None:
            raise _never_started(action_name)
        record.__exit__(None, None, None)

    def _finish(self) -> None:
        # Ends the profilers once per run: the table and the trace come from them.
        session, self._session = self._session, None
        profiler, self._profiler = self._profiler, None
        if session is None:
            return
        for record in reversed(self._ranges.values()):
            record.__exit__(None, None, None)
        self._ranges.clear()
        session.close()
        if profiler is None:  # emit_nvtx: the ranges went to nsys
            return
        self.function_events = profiler.events()
        if self.export_to_chrome and self.filename is not None:
            path = self.report_path(".pt.trace.json")
            path.parent.mkdir(parents=True, exist_ok=True)
            profiler.export_chrome_trace(str(path))
        events = profiler.key_averages(group_by_input_shape=self.group_by_input_shapes)
        sort_by = self.sort_by_key or "cpu_time_total"
        self._table = events.table(sort_by=sort_by, row_limit=self.row_limit, **self.table_kwargs)

    def summary(self) -> str:
        self._finish()
        if not self._table:
            return ""
        return f"{_stage_title(self._stage)} Profiler Report\n\n{self._table}"

    def _start_run(self) -> None:
        self._table = ""  # each run reports its own actions

    def teardown(self, stage: str | None) -> None:
        self._finish()
        super().teardown(stage)  # the table stays readable until the next run


class _TableKwargsError(ValueError, KeyError):
    # A ValueError, and a KeyError as Lightning raises for it; worded as a ValueError.
    __str__ = BaseException.__str__


def _checked_table_kwargs(table_kwargs: dict[str, Any]) -> dict[str, Any]:
    from torch.autograd.profiler_util import EventList

    allowed = sorted(set(inspect.signature(EventList.table).parameters) - _TABLE_OWN)
    for key in table_kwargs:
        if key in {"sort_by", "row_limit"}:
            own = "sort_by_key" if key == "sort_by" else "row_limit"
            raise _TableKwargsError(
                f"PyTorchProfiler(table_kwargs={{{key!r}: ...}}): set the table's {key} with "
                f"PyTorchProfiler({own}=...); table_kwargs takes {', '.join(allowed)}."
            )
        if key not in allowed:
            raise _TableKwargsError(
                f"PyTorchProfiler(table_kwargs={{{key!r}: ...}}): the table takes no {key!r}; "
                f"table_kwargs takes {', '.join(allowed)}." + did_you_mean(key, allowed)
            )
    return dict(table_kwargs)


_TABLE_OWN = {"self", "sort_by", "row_limit"}


def _check_torch_profiler_arguments(kwargs: dict[str, Any], emit_nvtx: bool) -> None:
    # Fail when built, not silently record nothing: the profiler runs over the whole
    # run, so a step schedule (or a trace handler it drives) would never advance.
    import torch

    if emit_nvtx:
        ignored = sorted(set(kwargs) - {"record_shapes"})
        if ignored:
            raise ValueError(
                f"PyTorchProfiler(emit_nvtx=True, {', '.join(ignored)}=...): with emit_nvtx "
                "the run is recorded as NVTX ranges, which take only record_shapes of the "
                "profiler arguments; remove the others, or leave emit_nvtx out."
            )
        return
    taken = set(inspect.signature(torch.profiler.profile).parameters)
    scheduled = {"schedule", "on_trace_ready"} & set(kwargs)
    if scheduled:
        raise ValueError(
            f"PyTorchProfiler({', '.join(sorted(scheduled))}=...): trainkit's PyTorchProfiler "
            "profiles the whole run as one range and steps no schedule; remove the argument "
            "and profile a short run (limit_train_batches / max_steps) instead."
        )
    unknown = sorted(set(kwargs) - taken)
    if unknown:
        raise ValueError(
            f"PyTorchProfiler got {', '.join(unknown)}, which torch.profiler.profile does "
            f"not take; it takes {', '.join(sorted(taken - {'schedule', 'on_trace_ready'}))}."
        )


def _never_started(action: str) -> ValueError:
    return ValueError(
        f"The profiler was asked to stop {action!r}, which it is not timing: call "
        f"start({action!r}) first, or time a block with profiler.profile({action!r})."
    )


def _already_started(action: str) -> ValueError:
    return ValueError(
        f"The profiler was asked to start {action!r}, which it is already timing: "
        f"stop({action!r}) first (an action does not nest in itself)."
    )


_BY_NAME: dict[str, Callable[[], Profiler]] = {
    "simple": SimpleProfiler,
    "advanced": AdvancedProfiler,
    "pytorch": PyTorchProfiler,
}


def build_profiler(profiler: Profiler | str | None) -> Profiler:
    """The Trainer's profiler from its ``profiler`` argument.

    Args:
        profiler: None (no profiling), "simple", "advanced", "pytorch" or a :class:`Profiler`.

    Example:
        >>> type(build_profiler("simple")).__name__
        'SimpleProfiler'
    """
    if profiler is None:
        return PassThroughProfiler()
    if isinstance(profiler, Profiler):
        return profiler
    if isinstance(profiler, str) and profiler.lower() in _BY_NAME:
        return _BY_NAME[profiler.lower()]()
    raise ValueError(
        f"profiler={profiler!r} is not a profiler: pass 'simple', 'advanced' or 'pytorch', "
        "a trainkit.profilers.Profiler, or None for no profiling."
    )


def is_active(profiler: Profiler) -> bool:
    """Whether ``profiler`` times anything (the Trainer wraps hooks only then)."""
    return type(profiler) is not PassThroughProfiler
