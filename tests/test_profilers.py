"""``Trainer(profiler=...)``: what is timed, where the report goes, and the profiler API."""

from __future__ import annotations

import json
import pstats
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from trainkit.profilers import (
    AdvancedProfiler,
    PassThroughProfiler,
    Profiler,
    PyTorchProfiler,
    SimpleProfiler,
    build_profiler,
)

from . import helpers
from .distributed.spawn import run_processes

BATCHES = 4


class Net(trainkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).square().mean()

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val", self.layer(batch[0]).mean())

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.validation_step(batch, batch_idx)

    def on_train_epoch_start(self) -> None:
        pass

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Seen(trainkit.Callback):
    def on_train_batch_end(self, *args: Any) -> None:
        pass


def data() -> DataLoader[Any]:
    return DataLoader(TensorDataset(torch.randn(2 * BATCHES, 2)), batch_size=2)


def fit(profiler: Any, tmp_path: Path, epochs: int = 2) -> trainkit.Trainer:
    trainer = trainkit.Trainer(
        max_epochs=epochs,
        profiler=profiler,
        callbacks=[Seen()],
        default_root_dir=tmp_path,
        num_sanity_val_steps=0,
        **{**helpers.QUIET, "enable_checkpointing": False},
    )
    trainer.fit(Net(), data(), data())
    return trainer


def calls(report: str) -> dict[str, int]:
    """Action -> number of calls, read from a SimpleProfiler report."""
    rows = [line.split("|") for line in report.splitlines() if line.count("|") == 4]
    assert rows and rows[0][2].strip() == "Num calls", report
    return {row[0].strip(): int(row[2]) for row in rows[1:] if row[2].strip().isdigit()}


def test_the_simple_report_counts_every_hook_step_and_fetch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fit("simple", tmp_path, epochs=2)
    out = capsys.readouterr().out
    assert out.startswith("FIT Profiler Report\n")
    counted = calls(out)
    assert counted["[Strategy]SingleDeviceStrategy.training_step"] == 2 * BATCHES
    assert counted["run_training_batch"] == 2 * BATCHES
    # One fetch per batch, and the one that finds the epoch's end.
    assert counted["train_dataloader_next"] == 2 * (BATCHES + 1)
    assert counted["[Strategy]SingleDeviceStrategy.validation_step"] == 2 * BATCHES
    assert counted["[Module]Net.on_train_epoch_start"] == 2
    assert counted["[Callback]Seen.on_train_batch_end"] == 2 * BATCHES
    assert "Total" in out and "Percentage %" in out


def test_a_filename_writes_one_report_per_run_in_the_log_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profiler = SimpleProfiler(filename="perf")
    trainer = fit(profiler, tmp_path, epochs=1)
    # Readable after the run, as Lightning's recorded_durations are.
    assert len(profiler.recorded_durations["run_training_batch"]) == BATCHES
    assert profiler.summary().startswith("FIT Profiler Report")
    trainer.test(Net(), data(), verbose=False)
    assert "run_training_batch" not in profiler.recorded_durations
    assert capsys.readouterr().out == ""  # written, not printed
    fit_report = (tmp_path / "fit-perf.txt").read_text()
    assert calls(fit_report)["[Strategy]SingleDeviceStrategy.training_step"] == BATCHES
    test_report = (tmp_path / "test-perf.txt").read_text()
    assert test_report.startswith("TEST Profiler Report")
    # Each run reports its own actions only.
    assert "training_step" not in test_report
    assert calls(test_report)["[Strategy]SingleDeviceStrategy.test_step"] == BATCHES


def test_the_advanced_report_lists_the_functions_each_action_ran(tmp_path: Path) -> None:
    profiler = AdvancedProfiler(dirpath=tmp_path / "prof", filename="adv", dump_stats=True)
    fit(profiler, tmp_path, epochs=1)
    report = (tmp_path / "prof" / "fit-adv.txt").read_text()
    assert "Profile stats for: [Strategy]SingleDeviceStrategy.training_step" in report
    assert "(training_step)" in report  # Net.training_step, as cProfile names it
    assert "cumulative" in report
    raw = tmp_path / "prof" / "fit-adv-Strategy_SingleDeviceStrategy.training_step.prof"
    functions = {name for (_, _, name) in pstats.Stats(str(raw)).stats}  # type: ignore[attr-defined]
    assert "training_step" in functions


def _outer_work() -> None:
    pass


def _inner_work() -> None:
    pass


def test_advanced_counts_each_call_in_the_innermost_action() -> None:
    profiler = AdvancedProfiler()
    profiler.start("outer")
    _outer_work()
    profiler.start("inner")
    _inner_work()
    profiler.stop("inner")
    _outer_work()
    profiler.stop("outer")

    def functions(action: str) -> dict[str, int]:
        stats = pstats.Stats(profiler.profiled_actions[action]).stats  # type: ignore[attr-defined]
        return {name: calls for (_, _, name), (calls, *_) in stats.items() if "work" in name}

    assert functions("outer") == {"_outer_work": 2}
    assert functions("inner") == {"_inner_work": 1}
    with pytest.raises(ValueError, match="not timing"):
        profiler.stop("inner")


def test_the_pytorch_profiler_writes_a_chrome_trace_with_the_actions(tmp_path: Path) -> None:
    profiler = PyTorchProfiler(dirpath=tmp_path, filename="trace", row_limit=5)
    fit(profiler, tmp_path, epochs=1)
    report = (tmp_path / "fit-trace.txt").read_text()
    assert "Self CPU time total" in report  # torch's table of operators and ranges
    assert "run_training_batch" in report
    trace = json.loads((tmp_path / "fit-trace.pt.trace.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert "[Strategy]SingleDeviceStrategy.training_step" in names
    assert "run_training_batch" in names
    # record_module_names (the default): each forward of the Module's submodules.
    assert LAYER in names
    # The run's events, under Lightning's attribute name.
    assert {"run_training_batch", LAYER} <= {event.name for event in profiler.function_events}


LAYER = "[nn.Module]torch.nn.modules.linear.Linear: layer"


def _profile_forward(profiler: PyTorchProfiler, model: Net) -> str:
    """The table of one action running ``model``'s layer, as the Trainer runs it."""
    profiler.module = model  # what the Trainer sets before a run
    with profiler.profile("forward"):
        model.layer(torch.ones(1, 2))
    return profiler.summary()


def test_record_module_names_names_each_submodule_forward_and_leaves_no_hooks() -> None:
    model = Net()
    assert LAYER in _profile_forward(PyTorchProfiler(row_limit=-1), model)
    assert not model.layer._forward_pre_hooks and not model.layer._forward_hooks
    table = _profile_forward(PyTorchProfiler(row_limit=-1, record_module_names=False), model)
    assert "forward" in table and "[nn.Module]" not in table
    # By hand, on any model, at Lightning's import path.
    from trainkit.lightning.profilers.pytorch import RegisterRecordFunction

    plain = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with torch.profiler.profile() as prof, RegisterRecordFunction(plain):
        plain(torch.ones(1, 2))
    names = {event.key for event in prof.key_averages()}
    assert "[nn.Module]torch.nn.modules.linear.Linear: 0" in names


def test_table_kwargs_reach_the_printed_table() -> None:
    model = Net()
    wide = _profile_forward(PyTorchProfiler(row_limit=-1), model)
    narrow = _profile_forward(
        PyTorchProfiler(row_limit=-1, table_kwargs={"max_name_column_width": 12}), model
    )
    assert LAYER in wide
    assert LAYER not in narrow and "[nn.Modul..." in narrow  # names cut to 12 characters


def test_bad_table_kwargs_and_sort_keys_fail_when_built_naming_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"no 'row_width'.*takes .*max_name_column_width"):
        PyTorchProfiler(table_kwargs={"row_width": 10})
    with pytest.raises(KeyError):  # what Lightning raises, for code that catches it
        PyTorchProfiler(table_kwargs={"row_width": 10})
    with pytest.raises(ValueError, match=r"PyTorchProfiler\(sort_by_key=\.\.\.\)"):
        PyTorchProfiler(table_kwargs={"sort_by": "count"})
    with pytest.raises(ValueError, match="Did you mean 'cpu_time_total'"):
        PyTorchProfiler(sort_by_key="cpu_time_totl")


def test_every_available_sort_key_sorts_the_table() -> None:
    lightning_keys = {
        "cpu_time",
        "cuda_time",
        "cpu_time_total",
        "cuda_time_total",
        "cpu_memory_usage",
        "cuda_memory_usage",
        "self_cpu_memory_usage",
        "self_cuda_memory_usage",
        "count",
    }
    assert lightning_keys <= PyTorchProfiler.AVAILABLE_SORT_KEYS
    assert "device_time_total" in PyTorchProfiler.AVAILABLE_SORT_KEYS
    for key in sorted(PyTorchProfiler.AVAILABLE_SORT_KEYS):
        profiler = PyTorchProfiler(sort_by_key=key, row_limit=-1, record_module_names=False)
        with profiler.profile("matmul"):
            torch.ones(4, 4) @ torch.ones(4, 4)
        assert "aten::matmul" in profiler.summary(), key
    steps = {"training_step", "validation_step", "test_step", "predict_step"}
    assert set(PyTorchProfiler.STEP_FUNCTIONS) == steps


def test_pytorch_profiler_takes_lightnings_arguments_in_lightnings_order() -> None:
    import inspect

    assert list(inspect.signature(PyTorchProfiler).parameters) == [
        "dirpath",
        "filename",
        "group_by_input_shapes",
        "emit_nvtx",
        "export_to_chrome",
        "row_limit",
        "sort_by_key",
        "record_module_names",
        "table_kwargs",
        "profiler_kwargs",
    ]
    profiler = PyTorchProfiler(None, "f", True, False, False, 5, "count", False, {"header": "h"})
    assert profiler.group_by_input_shapes and profiler.profiler_kwargs == {"record_shapes": True}
    assert (profiler.row_limit, profiler.sort_by_key, profiler.table_kwargs) == (
        5,
        "count",
        {"header": "h"},
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_emit_nvtx_builds_without_cuda_and_says_why_it_cannot_start() -> None:
    profiler = PyTorchProfiler(emit_nvtx=True, record_shapes=True)
    assert profiler.emit_nvtx
    with pytest.raises(RuntimeError, match=r"emit_nvtx=True\).*needs a CUDA GPU"):
        profiler.start("step")
    assert profiler.summary() == ""  # nothing was started


@pytest.mark.skipif(not torch.cuda.is_available(), reason="NVTX ranges need CUDA")
def test_emit_nvtx_records_the_run_for_nsys_and_reports_no_table(tmp_path: Path) -> None:
    profiler = PyTorchProfiler(dirpath=tmp_path, filename="nvtx", emit_nvtx=True)
    model = Net().cuda()
    with profiler.profile("forward"):
        model.layer(torch.ones(1, 2, device="cuda"))
    assert torch.autograd._profiler_enabled()  # recording NVTX ranges until the report
    assert profiler.summary() == ""
    assert not torch.autograd._profiler_enabled()
    assert list(tmp_path.iterdir()) == []  # no table, no Chrome trace: nsys has the ranges
    assert not model.layer._forward_hooks


def test_emit_nvtx_takes_only_the_profiler_arguments_nvtx_records() -> None:
    with pytest.raises(ValueError, match=r"emit_nvtx=True, profile_memory=.*only record_shapes"):
        PyTorchProfiler(emit_nvtx=True, profile_memory=True)


def test_local_rank_is_the_rank_the_profiler_was_set_up_with() -> None:
    for profiler in (
        Profiler(),
        PassThroughProfiler(),
        SimpleProfiler(),
        AdvancedProfiler(),
        PyTorchProfiler(),
    ):
        assert profiler.local_rank == 0  # before setup, as in a run of one process
        profiler.setup("fit", local_rank=3)
        assert profiler.local_rank == 3
        profiler.setup("test", local_rank=None)
        assert profiler.local_rank == 0


def test_start_stop_and_profile_record_durations() -> None:
    profiler = SimpleProfiler()
    with profiler.profile("load"):
        pass
    profiler.start("step")
    profiler.stop("step")
    profiler.start("step")
    profiler.stop("step")
    assert [len(profiler.recorded_durations[name]) for name in ("load", "step")] == [1, 2]
    assert all(d >= 0 for d in profiler.recorded_durations["step"])
    with pytest.raises(ValueError, match="not timing"):
        profiler.stop("never")
    profiler.start("twice")
    with pytest.raises(ValueError, match="already timing"):
        profiler.start("twice")


def test_profiler_names_and_objects_and_errors() -> None:
    assert type(build_profiler("simple")) is SimpleProfiler
    assert type(build_profiler("Advanced")) is AdvancedProfiler
    assert type(build_profiler("pytorch")) is PyTorchProfiler
    assert type(build_profiler(None)) is PassThroughProfiler
    mine = SimpleProfiler(extended=False)
    assert build_profiler(mine) is mine
    with pytest.raises(ValueError, match="pass 'simple', 'advanced' or 'pytorch'"):
        trainkit.Trainer(profiler="fancy")


def test_without_a_profiler_nothing_is_wrapped(tmp_path: Path) -> None:
    seen: list[Any] = []

    class Probe(trainkit.Callback):
        def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
            seen.append(trainer.profiler)

    trainer = trainkit.Trainer(max_steps=1, callbacks=[Probe()], **helpers.QUIET)
    trainer.fit(Net(), data())
    assert type(seen[0]) is PassThroughProfiler
    # The hook caller is the user's bound method itself: no timing frame in between.
    from trainkit.loops.hooks import Hooks

    hooks = Hooks(trainer, Net(), [], trainer.profiler)
    assert hooks.caller("on_train_epoch_start").__func__ is Net.on_train_epoch_start  # type: ignore[attr-defined]


def test_a_custom_profiler_sees_matching_starts_and_stops(tmp_path: Path) -> None:
    class Counting(Profiler):
        def __init__(self) -> None:
            super().__init__()
            self.open: list[str] = []
            self.closed = 0
            self.stages: list[tuple[str, int | None, str | None]] = []

        def start(self, action_name: str) -> None:
            self.open.append(action_name)

        def stop(self, action_name: str) -> None:
            assert self.open.pop() == action_name  # properly nested
            self.closed += 1

        # Lightning's signature, as a ported subclass overrides it.
        def setup(
            self, stage: str, local_rank: int | None = None, log_dir: str | None = None
        ) -> None:
            super().setup(stage, local_rank, log_dir)
            self.stages.append((stage, local_rank, log_dir))

    profiler = Counting()
    fit(profiler, tmp_path, epochs=1)
    assert profiler.open == [] and profiler.closed > 3 * BATCHES
    assert profiler.stages == [("fit", None, str(tmp_path))]
    assert profiler.local_rank == 0


def _profiled_job(root: str) -> tuple[int, int]:
    trainer = trainkit.Trainer(
        max_steps=2,
        strategy="ddp",
        profiler=SimpleProfiler(dirpath=root, filename="p"),
        **helpers.QUIET,
    )
    trainer.fit(Net(), data())
    return trainer.local_rank, trainer.profiler.local_rank


def test_each_process_writes_its_own_report(tmp_path: Path) -> None:
    assert run_processes(_profiled_job, 2, str(tmp_path)) == [(0, 0), (1, 1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit-p-0.txt", "fit-p-1.txt"]
    for rank in (0, 1):
        report = (tmp_path / f"fit-p-{rank}.txt").read_text()
        assert calls(report)["[Strategy]DDPStrategy.training_step"] == 2


def test_pytorch_profiler_arguments_it_cannot_honour_fail_when_built() -> None:
    import torch.profiler

    with pytest.raises(ValueError, match="steps no schedule"):
        PyTorchProfiler(schedule=torch.profiler.schedule(wait=1, warmup=1, active=2))
    # (An argument no torch version takes: use_cuda, say, was taken until torch 2.12.)
    with pytest.raises(ValueError, match=r"record_everything, which torch\.profiler\.profile"):
        PyTorchProfiler(record_everything=True)
    assert PyTorchProfiler(profile_memory=True).profiler_kwargs == {"profile_memory": True}
