"""Running a Trainer entry point in N new processes: ``strategy="ddp_spawn"``.

For code that cannot be re-run as a command (a notebook, an interactive
session), ``Trainer.fit`` itself starts the ranks with
``torch.multiprocessing``: the Trainer, the module and the data are sent to each
new process, which sets torchrun's variables (``RANK``, ``WORLD_SIZE``, ...) and
runs the same entry point as one rank of a DDP job. The calling process takes
no part in training; when the ranks are done, rank 0's results come back to it:
the trained weights are loaded into the caller's module, and the counters,
metrics and callback states (``best_model_path``) into the caller's Trainer.

The new processes are fresh interpreters ("spawn"), so the module's class and
the dataset must be importable: define them in a ``.py`` file next to the
notebook and import them there. (Forking the calling process instead is not
offered: a process forked after torch has started its CPU thread pool or CUDA
can hang.)
"""

from __future__ import annotations

import atexit
import os
import pickle
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.multiprocessing as mp

from trainkit.launch.environment import ClusterEnvironment
from trainkit.launch.launcher import Launcher, free_port
from trainkit.seed import capture_rng_states, restore_rng_states

if TYPE_CHECKING:
    from trainkit.trainer import Trainer

T = TypeVar("T")


@dataclass
class SpawnResult:
    """What rank 0 sends back to the calling process when its entry point returns."""

    value: Any = None
    module_state: dict[str, torch.Tensor] = field(default_factory=dict)
    trainer_state: dict[str, Any] = field(default_factory=dict)
    callback_metrics: dict[str, Any] = field(default_factory=dict)
    logged_metrics: dict[str, Any] = field(default_factory=dict)
    callback_states: list[dict[str, Any]] = field(default_factory=list)
    preempted: bool = False


class SpawnLauncher(Launcher):
    """Runs a Trainer entry point (``fit``, ``validate``, ...) in ``num_processes`` new processes.

    Args:
        num_processes: the number of ranks to start on this machine.
    """

    def __init__(self, num_processes: int) -> None:
        self.num_processes = num_processes

    def launch(self, function: Callable[..., T], *args: Any, trainer: Trainer) -> T:
        """Run ``function(*args)`` as each rank; return rank 0's return value.

        Args:
            function: a bound entry point of ``trainer`` (its copies run in the new processes).
            *args: the entry point's arguments (the module first).
            trainer: the calling process's Trainer; rank 0's results are loaded into it.
        """
        module = args[0]
        outbox = Path(tempfile.mkdtemp(prefix="trainkit-spawn-"))
        try:
            # Plain pickle bytes, not objects: torch.multiprocessing would move the
            # module's tensors into memory shared by every rank, and each rank's
            # optimizer would then update the same weights. The ranks also start
            # from this process's random state, as code after Trainer(seed=...) would.
            payload = pickle.dumps((trainer, function, args, capture_rng_states()))
            # Raises with the failing rank's traceback if any rank fails, after
            # ending the others.
            mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
                _run_rank,
                args=(self.num_processes, free_port(), payload, str(outbox)),
                nprocs=self.num_processes,
                start_method="spawn",
            )
            result: SpawnResult = torch.load(outbox / "result.pt", weights_only=False)
        finally:
            shutil.rmtree(outbox, ignore_errors=True)
        _adopt(trainer, module, result)
        return result.value  # type: ignore[no-any-return]


def _run_rank(rank: int, world_size: int, port: int, payload: bytes, outbox: str) -> None:
    # The strategy reads who this process is from these variables when it sets up.
    ClusterEnvironment.local(rank, world_size, port).export()
    try:
        trainer, function, args, rng = pickle.loads(payload)
    except AttributeError as error:
        raise RuntimeError(
            f"strategy='ddp_spawn' could not rebuild the Trainer's arguments in a new "
            f"process: {error}. Classes defined in a notebook cell or in `python -c` code "
            "cannot be imported by other processes; move the Module, DataModule and "
            "dataset classes to a .py file and import them."
        ) from error
    restore_rng_states(rng)
    # The entry point's implementation: this process is a rank, it launches nothing.
    value = function(*args)
    if rank == 0:
        module = args[0]
        result = SpawnResult(
            value=value,
            module_state={k: v.detach().cpu() for k, v in module.state_dict().items()},
            trainer_state=trainer.state.state_dict(),
            callback_metrics={k: v.detach().cpu() for k, v in trainer.callback_metrics.items()},
            logged_metrics=dict(trainer.logged_metrics),
            callback_states=[callback.state_dict() for callback in trainer.callbacks],
            preempted=trainer.state.preempted,
        )
        # A file, not a pipe: the caller reads it only after every rank has exited.
        torch.save(result, Path(outbox, "result.pt"))
    _exit_now()


def _exit_now() -> None:
    """End this rank's process with status 0, without the interpreter's shutdown.

    The process group's backend threads may still be releasing finished
    collectives, which needs the interpreter; one caught by the shutdown aborts
    the process (SIGABRT) after its work is done. The exit handlers (trainkit's
    leaves the process group) still run, first.
    """
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _adopt(trainer: Trainer, module: Any, result: SpawnResult) -> None:
    """Make the caller's module and Trainer look as if the run had happened here."""
    module.load_state_dict(result.module_state)
    trainer.state.load_state_dict(result.trainer_state)
    trainer.state.preempted = result.preempted
    trainer.results.adopt(result.callback_metrics, result.logged_metrics)
    for callback, state in zip(trainer.callbacks, result.callback_states, strict=True):
        if state:
            callback.load_state_dict(state)
