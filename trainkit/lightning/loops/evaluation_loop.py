"""Lightning's ``_EvaluationLoop``, for projects that subclass it to print results their way.

A subclass overrides ``_print_results(results, stage)`` and an instance is set as
``trainer.test_loop`` (or ``validate_loop``): trainkit's ``test`` and ``validate``
then print through it. The loop is trainkit's loop view otherwise
(``inference_mode``, ``_data_source``); running it by hand (``run()``) is not
provided.
"""

from __future__ import annotations

from typing import Any

from trainkit.lightning._missing import missing
from trainkit.trainer.evaluation_loops import EvaluationLoop

__all__ = ["_EvaluationLoop"]


class _EvaluationLoop(EvaluationLoop):
    """A Trainer's validation or test loop, as Lightning's constructor makes one.

    Args:
        trainer: the Trainer.
        trainer_fn: ``TrainerFn.VALIDATING`` or ``TrainerFn.TESTING`` (or "validate", "test").
        stage: the ``RunningStage`` (accepted; it follows from ``trainer_fn``).
        verbose: kept as ``verbose`` (the entry point's ``verbose`` argument decides).
        inference_mode: evaluate under ``torch.inference_mode`` (else ``torch.no_grad``).

    Example:
        >>> import trainkit.lightning as L
        >>> class Quiet(_EvaluationLoop):
        ...     @staticmethod
        ...     def _print_results(results, stage):
        ...         print(f"{stage}: {len(results)} dataloader(s)")
        >>> trainer = L.Trainer(logger=False)
        >>> trainer.test_loop = Quiet(trainer, "test", "test")
        >>> trainer.test_loop._print_results([{"acc": 1.0}], "test")
        test: 1 dataloader(s)
    """

    def __init__(
        self,
        trainer: Any,
        trainer_fn: Any,
        stage: Any = None,
        verbose: bool = True,
        inference_mode: bool = True,
    ) -> None:
        fn = str(getattr(trainer_fn, "value", trainer_fn))
        if fn not in ("validate", "test"):
            raise ValueError(
                f"_EvaluationLoop(trainer_fn={trainer_fn!r}) makes a 'validate' or 'test' loop "
                "(TrainerFn.VALIDATING or TrainerFn.TESTING)."
            )
        super().__init__(trainer, fn)
        self.verbose = verbose
        self.inference_mode = inference_mode

    def __setattr__(self, name: str, value: Any) -> None:
        # A subclass keeps what it likes on itself, as on Lightning's loop objects.
        object.__setattr__(self, name, value)


def __getattr__(name: str) -> Any:
    raise missing(__name__, name, __all__)
