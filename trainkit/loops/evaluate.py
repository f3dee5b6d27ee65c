"""The evaluation loop (validation, test, the sanity check) and the prediction loop.

:func:`run_evaluation` serves ``Trainer.validate``, ``Trainer.test``, the
validation runs inside fit and the sanity check before it; :func:`run_predict`
collects predictions. Both receive the run's :class:`~trainkit.loops.hooks.Run`
and write only to its state and results.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

import torch

from trainkit.core.batches import move_data_to_device
from trainkit.core.data import batches
from trainkit.core.epoch_position import set_sampler_epoch
from trainkit.core.module import overrides
from trainkit.core.steps import defined_step, fit_step_arguments
from trainkit.loops.results import Results
from trainkit.loops.run import Predicting, Run
from trainkit.loops.schedule import sanity_batches
from trainkit.loops.state import RunningStage
from trainkit.utilities.seed import isolated_rng

#: The stage (``RunState.stage``) each evaluation runs as.
_STAGES = {"validation": RunningStage.VALIDATING, "test": RunningStage.TESTING}


def run_sanity_check(run: Run, loaders: list[Iterable[Any]], limit: int) -> None:
    """A few validation batches before training, to catch bugs before a long epoch.

    Its results are not kept, and it leaves the random state as it found it.

    Args:
        run: the run's context.
        loaders: the prepared validation dataloaders.
        limit: ``num_sanity_val_steps``: batches from each loader (-1: all).
    """
    state = run.state
    full = state.num_val_batches
    state.num_val_batches = sanity_batches(full, limit)
    state.stage = RunningStage.SANITY_CHECKING
    try:
        run.hooks.call("on_sanity_check_start")
        with isolated_rng():
            run_evaluation(run, loaders, state.num_val_batches, "validation")
        run.hooks.call("on_sanity_check_end")
    finally:
        state.stage = RunningStage.TRAINING
        state.num_val_batches = full
        run.results.eval.reset()


def run_evaluation(
    run: Run, loaders: list[Iterable[Any]], totals: list[float], stage: str
) -> list[dict[str, float]]:
    """Run ``validation_step`` or ``test_step`` over every loader; return each loader's metrics.

    Pseudocode::

        remember each submodule's train/eval mode; model.eval()
        on_{stage}_start; on_{stage}_epoch_start
        under torch.inference_mode (torch.no_grad inside fit, see _no_grad):
            for each loader, for each batch (limited):
                on_{stage}_batch_start; step; on_{stage}_batch_end; write step values
        Module's on_{stage}_epoch_end; reduce epoch metrics (weighted, across
        processes); callbacks' on_{stage}_epoch_end (they see this run's values)
        on_{stage}_end (self.log refused there); restore modes

    The sanity check runs this with ``state.stage == "sanity_check"``: its
    results are not kept.

    Args:
        run: the run's context.
        loaders: the prepared dataloaders.
        totals: batches to run from each loader.
        stage: "validation" or "test".

    Returns:
        One dict per dataloader: the epoch values sent to loggers that it logged,
        plus those logged outside its batches (epoch hooks).
    """
    state, results, hooks = run.state, run.results, run.hooks
    for loader in loaders:  # the fit's epoch, as Lightning tells evaluation samplers
        set_sampler_epoch(loader, state.epoch)
    method = defined_step(run.module, f"{stage}_step", state.fn)
    step = run.strategy.step_function(run.model, f"{stage}_step")
    several = len(loaders) > 1
    check_dataloader_idx(step, f"{stage}_step", several)
    step = fit_step_arguments(step, method)
    step = hooks.profiled(f"[Strategy]{type(run.strategy).__name__}.{stage}_step", step)
    modes = {sub: sub.training for sub in run.module.modules()}
    _set_mode(run, f"on_{stage}_model_eval")
    if state.fn in _STAGES.values():  # a validate()/test() call starts with no metrics
        results.reset_metrics()
    results.eval.reset()
    results.enter_evaluation()
    outer_stage = state.stage
    sanity_checking = state.sanity_checking
    if not sanity_checking:
        state.stage = _STAGES[stage]
    try:
        # The whole run without autograd, its hooks too, as in Lightning: a forward
        # pass in on_validation_epoch_end builds no graph.
        with _no_grad(run):
            values = _evaluate(run, stage, step, loaders, totals)
    finally:
        results.close()
        state.stage = outer_stage
        # Each submodule back to its mode (set directly: train() would recurse).
        for sub, was_training in modes.items():
            sub.training = was_training
        # Validation inside fit hands the model back to training; a validate()/test()
        # call runs the Module's own hook too, as Lightning's does.
        if state.fn == "fit" or overrides(run.module, f"on_{stage}_model_train"):
            _set_mode(run, f"on_{stage}_model_train", default=None)
    return results.evaluation_outputs(values, len(loaders))


def _evaluate(
    run: Run,
    stage: str,
    step: Callable[..., Any],
    loaders: list[Iterable[Any]],
    totals: list[float],
) -> dict[str, Any]:
    """The hooks and batches of one evaluation run; its epoch values."""
    state, results, hooks = run.state, run.results, run.hooks
    to_device, several = run.batch_to_device, len(loaders) > 1
    sanity_checking = state.sanity_checking
    hooks.call(f"on_{stage}_start")
    hooks.call(f"on_{stage}_epoch_start")
    on_batch_start = hooks.caller(f"on_{stage}_batch_start")
    on_batch_end = hooks.caller(f"on_{stage}_batch_end")
    for loader_idx, (loader, total) in enumerate(zip(loaders, totals, strict=True)):
        index = loader_idx if several else None
        extra = (loader_idx,) if several else ()
        for batch_idx, batch, _ in batches(loader, total):
            batch = to_device(batch, loader_idx)
            results.enter_evaluation(index, batch)
            # dataloader_idx only with several loaders, as Lightning passes it.
            on_batch_start(batch, batch_idx, *extra)
            with run.step_context():
                outputs = step(batch, batch_idx, *extra)
            on_batch_end(outputs, batch, batch_idx, *extra)
            if not sanity_checking:
                results.write_evaluation_step(run, index)
    results.enter_evaluation()
    # Reduce before the epoch-end hooks, so that they read this run's values
    # in callback_metrics; again after the Module's, which may log more.
    values = _epoch_results(results, sanity_checking)
    logged = [0]

    def after_module_hook() -> None:
        nonlocal values
        values = _epoch_results(results, sanity_checking)
        logged[0] = len(results.eval.entries)

    hooks.call_epoch_end(f"on_{stage}_epoch_end", after_module_hook)
    if len(results.eval.entries) != logged[0]:  # a monitoring callback logged: count it
        values = _epoch_results(results, sanity_checking)
    results.close(f"on_{stage}_end")
    hooks.call(f"on_{stage}_end")
    # Logged Metric objects start afresh only now: the epoch-end and end hooks
    # may read metric.compute() (the epoch's value), as in Lightning.
    results.eval.reset_computed_metrics()
    return values


def _set_mode(run: Run, hook: str, default: str | None = "eval") -> None:
    """The Module's ``on_*_model_eval``/``_train`` hook if it overrides it, else the default."""
    if overrides(run.module, hook):
        getattr(run.module, hook)()
    elif default == "eval":
        run.model.eval()


def _no_grad(run: Run) -> AbstractContextManager[Any]:
    """``torch.inference_mode`` in validate, test and predict; ``torch.no_grad`` inside fit
    (as Lightning: a tensor a step makes there, a cache say, may meet autograd in
    training, which refuses inference tensors), under a strategy that shards the model
    (its gathered parameters are reused by training) and with ``inference_mode=False``."""
    if run.inference_mode and run.fn != "fit" and not run.strategy.shards_parameters:
        return torch.inference_mode()
    return torch.no_grad()


def _epoch_results(results: Results, sanity_checking: bool) -> dict[str, Any]:
    """The evaluation epoch values, kept for callbacks (during the sanity check: shown only)."""
    values = results.eval.epoch_values()
    if sanity_checking:
        results.show_sanity_results(values)
    else:
        results.update_epoch_metrics(values, logged_from=results.eval)
    return values


def run_predict(
    run: Run, loaders: list[Iterable[Any]], totals: list[float], keep: bool = True
) -> list[list[Any]]:
    """Run ``predict_step`` over every loader; return each loader's list of outputs.

    Kept outputs are moved to the CPU, as Lightning keeps them, so that a long
    prediction run does not fill the accelerator's memory; they are in
    ``run.predicting`` while the run goes on (``trainer.predict_loop.predictions``).

    Args:
        run: the run's context.
        loaders: the prepared dataloaders.
        totals: batches to run from each loader.
        keep: keep the outputs (False: each is dropped once the hooks have seen it,
            so memory stays flat; nothing comes back).
    """
    step = run.strategy.step_function(run.model, "predict_step")
    several = len(loaders) > 1
    check_dataloader_idx(step, "predict_step", several)
    step = fit_step_arguments(step, run.module.predict_step)
    step = run.hooks.profiled(f"[Strategy]{type(run.strategy).__name__}.predict_step", step)
    modes = {sub: sub.training for sub in run.module.modules()}
    _set_mode(run, "on_predict_model_eval")
    run.state.stage = RunningStage.PREDICTING
    run.results.reset_metrics()  # a predict() call starts with no metrics, as validate()/test()
    kept: list[list[Any]] = [[] for _ in loaders] if keep else []
    predicting = run.predicting = Predicting(keep, kept)
    try:
        _predict(run, loaders, totals, step, predicting)
    finally:
        for sub, was_training in modes.items():  # each submodule back to its mode
            sub.training = was_training
    return predicting.kept


def _predict(
    run: Run,
    loaders: list[Iterable[Any]],
    totals: list[float],
    step: Callable[..., Any],
    predicting: Predicting,
) -> None:
    hooks, to_device, several = run.hooks, run.batch_to_device, len(loaders) > 1
    keep, cpu = predicting.keep, torch.device("cpu")
    with _no_grad(run):  # the hooks too, as in Lightning
        hooks.call("on_predict_start")
        hooks.call("on_predict_epoch_start")
        for loader_idx, (loader, total) in enumerate(zip(loaders, totals, strict=True)):
            extra = (loader_idx,) if several else ()
            outputs = predicting.kept[loader_idx] if keep else []
            for batch_idx, batch, _ in batches(loader, total):
                predicting.position = (loader_idx, batch_idx)
                batch = to_device(batch, loader_idx)
                hooks.call("on_predict_batch_start", batch, batch_idx, *extra)
                with run.step_context():
                    prediction = step(batch, batch_idx, *extra)
                if prediction is None and not predicting.returned_none:
                    predicting.returned_none = True  # Lightning's words first
                    run.warn(
                        "predict returned None if it was on purpose, ignore this warning... "
                        f"(predict_step returned None for batch {batch_idx}: return what "
                        "trainer.predict should give back)"
                    )
                hooks.call("on_predict_batch_end", prediction, batch, batch_idx, *extra)
                if keep:  # after the hooks, as Lightning adds it
                    outputs.append(move_data_to_device(prediction, cpu))
        hooks.call("on_predict_epoch_end")
        hooks.call("on_predict_end")


def check_dataloader_idx(step: Callable[..., Any], name: str, several: bool) -> None:
    """Check once that a step taking several loaders accepts ``dataloader_idx``.

    Args:
        step: the step method.
        name: its name, for the message.
        several: whether there are several dataloaders.
    """
    if not several:
        return
    try:
        inspect.signature(step).bind(None, 0, 0)
    except TypeError:
        raise TypeError(
            f"{name} receives several dataloaders, so it is called as "
            f"{name}(batch, batch_idx, dataloader_idx); add a `dataloader_idx: int = 0` "
            "parameter."
        ) from None
    except ValueError:  # no signature (a C function): let the call decide
        pass


def format_results(outputs: list[dict[str, Any]], stage: str) -> str:
    """The table ``validate(verbose=True)``/``test(verbose=True)`` prints.

    One row per metric (sorted by name), one column per dataloader; a metric a
    dataloader did not log is left blank there.

    Args:
        outputs: what the run returns, one dict per dataloader (numbers or 0-d tensors).
        stage: "validate" or "test" (the first column's title).

    Returns:
        The table, lines joined by newlines (empty when nothing was logged).

    Example:
        >>> print(format_results([{"acc": 0.5}], "test"))
        Test metric    DataLoader 0
        ---------------------------
        acc            0.5
    """
    names = sorted({name for output in outputs for name in output})
    if not names:
        return ""
    header = [f"{stage.capitalize()} metric"] + [f"DataLoader {i}" for i in range(len(outputs))]
    rows = [[name] + [f"{o[name]:g}" if name in o else "" for o in outputs] for name in names]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "    ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)
