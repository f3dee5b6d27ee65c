"""``trainer.validate_loop``, ``test_loop`` and ``predict_loop``: Lightning's evaluation
loop objects, as views of the Trainer.

trainkit's evaluation and prediction loops are functions over a run
(``trainkit/loops/evaluate.py``), not loop objects. Ported code reads and sets
what Lightning's loop objects expose for it::

    trainer.test_loop.inference_mode = False    # test under torch.no_grad (a model that
                                                # needs autograd in test_step)
    trainer.predict_loop.predictions            # in on_predict_epoch_end: what ran so far
    trainer.predict_loop.current_batch_indices  # the dataset indices of the batch running

Each view is made once per Trainer, so a setting made on it holds for the
Trainer's later runs. Driving a loop by hand (``run()``, ``setup_data()``,
``state_dict()``) is Lightning's loop machinery, which trainkit does not have:
those names raise an AttributeError that says what to call instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.prediction_writer import seen_batches
from trainkit.loops.evaluate import format_results
from trainkit.trainer.data_source import DataSource

if TYPE_CHECKING:
    from trainkit.loops.run import Predicting, Run

__all__ = [
    "EvaluationLoop",
    "FitValidationLoop",
    "PredictionLoop",
    "evaluation_inference_mode",
    "evaluation_loops",
    "set_evaluation_loop",
]

#: What each loop's Trainer method is, for the messages.
_METHODS = {
    "fit": "trainer.fit",
    "validate": "trainer.validate",
    "test": "trainer.test",
    "predict": "trainer.predict",
}
#: The stage whose dataloaders each loop runs.
_STAGES = {"fit": "val", "validate": "val", "test": "test", "predict": "predict"}


class EvaluationLoop:
    """Lightning's ``trainer.validate_loop`` and ``trainer.test_loop``.

    Args:
        trainer: the Trainer the loop belongs to.
        fn: "validate" or "test".
    """

    def __init__(self, trainer: Any, fn: str) -> None:
        self.trainer = trainer
        self._fn = fn
        self._inference_mode: bool | None = None

    @property
    def inference_mode(self) -> bool:
        """Whether this loop runs under ``torch.inference_mode`` (False: ``torch.no_grad``).

        Starts as the Trainer's ``inference_mode`` option; settable, for this loop
        alone (as each of Lightning's loops has its own). A strategy that shards
        the model evaluates under ``torch.no_grad`` whatever this says, as in
        Lightning.
        """
        if self._inference_mode is None:
            return bool(self.trainer.options.inference_mode)
        return self._inference_mode

    @inference_mode.setter
    def inference_mode(self, value: bool) -> None:
        self._inference_mode = bool(value)

    #: What the messages say may be set on this view.
    _settable = " but inference_mode"

    def print_results(self, results: list[dict[str, float]], stage: str) -> None:
        """Print the table of a run's results (``validate`` or ``test`` with ``verbose=True``).

        Through :meth:`_print_results`, which a loop of the ported ``_EvaluationLoop``
        class set as ``trainer.test_loop`` or ``validate_loop`` overrides.

        Args:
            results: what the run returns, one dict per dataloader.
            stage: "validate" or "test".
        """
        self._print_results([{k: torch.tensor(v) for k, v in r.items()} for r in results], stage)

    @staticmethod
    def _print_results(results: list[dict[str, torch.Tensor]], stage: str) -> None:
        """Print the results, each value a 0-d tensor (Lightning's private name and types).

        Args:
            results: one dict per dataloader.
            stage: "validate" or "test".
        """
        table = format_results(results, stage)
        if table:
            print(table, flush=True)

    @property
    def _path(self) -> str:
        """How the messages name this view."""
        return f"trainer.{self._fn}_loop"

    @property
    def _data_source(self) -> DataSource:
        """Where this loop's dataloaders come from (Lightning's private name, read by
        ported code: ``_data_source.is_defined()``)."""
        return DataSource(self.trainer, _STAGES[self._fn])

    def _run(self) -> Run | None:
        """The Trainer's run, when it is (or was last) this loop's."""
        run = getattr(self.trainer, "_current", None)
        return run if run is not None and run.fn == self._fn else None

    def __getattr__(self, name: str) -> Any:
        # Only names not found above arrive here: Lightning's loop machinery.
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"{self._path} has no {name!r}: trainkit's loops are functions over "
            f"a run, not Lightning's loop objects, so they cannot be driven by hand. Call "
            f"{_METHODS[self._fn]}(...) to run this loop; docs/porting.md lists what the loop "
            "views provide."
        )

    def __setattr__(self, name: str, value: Any) -> None:
        # A setting the loops would not read (trainer_fn, verbose...) is refused, not ignored.
        if name not in _SETTABLE:
            raise AttributeError(
                f"{self._path}.{name} cannot be set: trainkit's {self._fn} loop reads no "
                f"setting from this view{self._settable}. Pass the setting to "
                f"{_METHODS[self._fn]}(...) or the Trainer instead; docs/porting.md lists "
                "what the loop views provide."
            )
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(fn={self._fn!r}, inference_mode={self.inference_mode})"


#: What may be set on a loop view (the rest is refused, see ``__setattr__``).
_SETTABLE = frozenset({"trainer", "_fn", "_inference_mode", "inference_mode"})


class FitValidationLoop(EvaluationLoop):
    """Lightning's ``trainer.fit_loop.epoch_loop.val_loop``: the validation inside fit.

    It validates under ``torch.no_grad``, as Lightning's does (``inference_mode`` is
    False and cannot be set: a tensor made there may meet autograd in training).
    """

    _settable = ""

    def __init__(self, trainer: Any) -> None:
        super().__init__(trainer, "fit")

    @property
    def _path(self) -> str:
        return "trainer.fit_loop.epoch_loop.val_loop"

    @property
    def inference_mode(self) -> bool:
        """False: fit validates under ``torch.no_grad``."""
        return False

    @inference_mode.setter
    def inference_mode(self, value: bool) -> None:
        raise AttributeError(
            "trainer.fit_loop.epoch_loop.val_loop.inference_mode cannot be set: trainkit's "
            "fit validates under torch.no_grad (Lightning's default there). "
            "trainer.validate_loop.inference_mode sets it for trainer.validate."
        )


class PredictionLoop(EvaluationLoop):
    """Lightning's ``trainer.predict_loop``: the predictions and the batch indices."""

    def __init__(self, trainer: Any) -> None:
        super().__init__(trainer, "predict")

    def _predicting(self) -> Predicting | None:
        run = self._run()
        return run.predicting if run is not None else None

    @property
    def predictions(self) -> list[Any]:
        """The last ``predict`` run's kept predictions (on the CPU), so far while it runs.

        One list of the batches' outputs, or with several dataloaders one such list per
        dataloader. A batch's output joins after its ``on_predict_batch_end`` hooks, as in
        Lightning. Empty before any ``predict``, and after one called with
        ``return_predictions=False`` (nothing is kept).
        """
        predicting = self._predicting()
        kept = predicting.kept if predicting is not None else []
        if not kept:
            return []
        return kept[0] if len(kept) == 1 else kept

    @property
    def num_dataloaders(self) -> int:
        """How many prediction dataloaders the last ``predict`` run had (0 before any)."""
        run = self._run()
        return len(run.state.num_predict_batches) if run is not None else 0

    @property
    def return_predictions(self) -> bool:
        """Whether the last ``predict`` kept its predictions (False before any, as in
        Lightning; ``predict`` keeps them unless told not to)."""
        predicting = self._predicting()
        return predicting.keep if predicting is not None else False

    @property
    def current_batch_indices(self) -> list[int]:
        """The dataset indices of the batch running (empty where they are not known).

        Known for a plain ``DataLoader`` over a map-style dataset, as
        ``BasePredictionWriter``'s ``batch_indices`` are.
        """
        predicting = self._predicting()
        if predicting is None or predicting.position is None:
            return []
        dataloader_idx, batch_idx = predicting.position
        seen = seen_batches(self.trainer, dataloader_idx)
        return list(seen[batch_idx]) if seen is not None and batch_idx < len(seen) else []

    @property
    def epoch_batch_indices(self) -> list[list[list[int]]]:
        """Each dataloader's batches' dataset indices, for the batches run so far."""
        run = self._run()
        if run is None:
            return []
        indices = []
        for dataloader_idx in range(len(run.state.num_predict_batches)):
            seen = seen_batches(self.trainer, dataloader_idx)
            indices.append([list(batch) for batch in seen] if seen is not None else [])
        return indices


def evaluation_loops(trainer: Any) -> dict[str, EvaluationLoop]:
    """A Trainer's three views, by the function they serve ("validate", "test", "predict").

    Args:
        trainer: the Trainer.
    """
    return {
        "validate": EvaluationLoop(trainer, "validate"),
        "test": EvaluationLoop(trainer, "test"),
        "predict": PredictionLoop(trainer),
    }


def set_evaluation_loop(loops: dict[str, EvaluationLoop], fn: str, loop: Any) -> None:
    """Make ``loop`` the Trainer's ``validate_loop`` or ``test_loop`` (Lightning allows it).

    Args:
        loops: the Trainer's views (:func:`evaluation_loops`).
        fn: "validate" or "test".
        loop: a loop made for that function, e.g. of a subclass of the ported
            ``_EvaluationLoop`` that prints the results its own way.

    Raises:
        TypeError: ``loop`` is not an evaluation loop for ``fn``.
    """
    if not isinstance(loop, EvaluationLoop) or getattr(loop, "_fn", None) != fn:
        raise TypeError(
            f"trainer.{fn}_loop can only be set to an evaluation loop made for {fn} (e.g. a "
            f"subclass of trainkit.lightning.loops.evaluation_loop._EvaluationLoop built with "
            f"the trainer and TrainerFn for {fn}), not {loop!r}."
        )
    loops[fn] = loop


def evaluation_inference_mode(loops: dict[str, EvaluationLoop], options: Any, fn: str) -> bool:
    """Whether a run of ``fn`` evaluates under ``torch.inference_mode``: its loop's setting.

    Args:
        loops: the Trainer's views (:func:`evaluation_loops`).
        options: the Trainer's loop options (``inference_mode``).
        fn: the run's function ("fit" reads the option; fit validates under
            ``torch.no_grad`` whatever it says).
    """
    loop = loops.get(fn)
    return loop.inference_mode if loop is not None else bool(options.inference_mode)
