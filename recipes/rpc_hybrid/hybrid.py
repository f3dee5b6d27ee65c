"""The master/worker hybrid on ``torch.distributed.rpc``, and the same training in one process.

Process 0 is the master: it holds the data and the only copy of the weights
(a parameter server). Processes 1..N-1 are workers, each holding the
classifier as two stages (``stage0`` on ``devices[0]``, ``stage1`` on
``devices[1]``), created by the master with ``rpc.remote`` (an ``RRef`` per
worker). One step:

1. Inside a distributed-autograd context, the master cuts the batch into one
   part per worker and sends each worker, with ``rpc_async``, its part and the
   current weights (tensors that require grad, so distributed autograd records
   the send).
2. Each worker runs stage 0 then stage 1 with those weights and returns its
   part of the loss: the sum of its samples' cross-entropy divided by the
   *whole* batch size.
3. The master adds the parts (the mean over the whole batch) and runs
   ``dist_autograd.backward``: the gradients flow back from both workers to
   the master's weights, where the replicas' contributions add up.
4. A ``DistributedOptimizer`` steps the weights by ``RRef``.

The workers are data-parallel replicas that cannot drift apart, since there is
one set of weights; the step is the single-process step on the whole batch (up
to float rounding), which the recipe's test checks. On CPU the two "devices" of
a worker are the same CPU: the split shows where a model too big for one device
would be cut, not a speed-up. Only CPU is tested; PyTorch documents that
distributed autograd does not support CUDA tensors, so what crosses RPC here
stays on CPU.
"""

from __future__ import annotations

import multiprocessing
import socket
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.multiprocessing as mp
from torch.distributed import rpc
from torch.distributed.optim import DistributedOptimizer
from torch.func import functional_call
from torch.nn import functional as F

from recipes.rpc_hybrid.model import batches, blobs, build_model

MASTER = "master"


def worker_name(rank: int) -> str:
    """The RPC name of the worker with process rank ``rank`` (1, 2, ...)."""
    return f"worker{rank}"


@dataclass(frozen=True)
class Config:
    """What one training run does.

    Attributes:
        steps: Optimizer steps.
        batch_size: Points per step, split among the workers.
        lr: SGD learning rate.
        seed: Seed of the weights, the data and the batch order.
        train_points: Size of the synthetic training set.
        test_points: Size of the held-out set the accuracy is measured on.
        rpc_timeout: Seconds any RPC may take before it fails (and the run with it).
    """

    steps: int = 150
    batch_size: int = 64
    lr: float = 0.5
    seed: int = 0
    train_points: int = 2048
    test_points: int = 1024
    rpc_timeout: float = 60.0


class Worker:
    """One data-parallel replica, holding the classifier as two stages.

    Args:
        seed: Seed of the (unused) initial weights of the local modules; only
            their structure matters, the weights come from the master each step.
        devices: Where stage 0 and stage 1 run (only CPU is tested).
    """

    def __init__(self, seed: int, devices: tuple[str, str] = ("cpu", "cpu")) -> None:
        self.devices = (torch.device(devices[0]), torch.device(devices[1]))
        model = build_model(seed)
        self.stages = (model[0].to(self.devices[0]), model[1].to(self.devices[1]))
        self.names = [[name for name, _ in stage.named_parameters()] for stage in self.stages]

    def _logits(self, weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        remaining = iter(weights)
        hidden = x
        for stage, names, device in zip(self.stages, self.names, self.devices, strict=True):
            stage_weights = {name: next(remaining).to(device) for name in names}
            hidden = functional_call(stage, stage_weights, (hidden.to(device),))
        return hidden.cpu()

    def train_step(
        self, weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, batch_size: int
    ) -> tuple[torch.Tensor, int]:
        """Forward this worker's part of a batch.

        Args:
            weights: The master's current weights, in ``model.parameters()`` order.
            x: This worker's inputs.
            y: Their labels.
            batch_size: Size of the whole batch (all workers' parts).

        Returns:
            ``(loss, correct)``: this part's share of the batch's mean
            cross-entropy (recorded by distributed autograd) and how many of its
            points were classified right.
        """
        logits = self._logits(weights, x)
        loss = F.cross_entropy(logits, y, reduction="sum") / batch_size
        return loss, int((logits.argmax(dim=1) == y).sum())

    def correct(self, weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> int:
        """How many of ``x`` the master's ``weights`` classify right (no gradients)."""
        with torch.no_grad():
            return int((self._logits(weights, x).argmax(dim=1) == y).sum())


def _train_step(
    worker: rpc.RRef[Worker],
    weights: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
) -> tuple[torch.Tensor, int]:
    # Runs on the worker. Called with rpc.rpc_async rather than the RRef's
    # ``rpc_async()`` proxy: the proxy's first call on an RRef waits for its
    # type in a callback thread, outside the master's distributed-autograd
    # context, and that call's loss came back without its gradient path
    # (seen with torch 2.14).
    replica: Worker = worker.local_value()
    return replica.train_step(weights, x, y, batch_size)


def _correct(
    worker: rpc.RRef[Worker], weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor
) -> int:
    replica: Worker = worker.local_value()
    return replica.correct(weights, x, y)


def _split(x: torch.Tensor, y: torch.Tensor, parts: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return list(zip(x.tensor_split(parts), y.tensor_split(parts), strict=True))


def run_master(config: Config, world_size: int) -> dict[str, Any]:
    """Train from the master process (rank 0) once RPC is up; see the module docstring.

    Args:
        config: The run.
        world_size: Number of processes: the master and ``world_size - 1`` workers.

    Returns:
        ``state_dict`` (the trained weights), ``losses`` (per step),
        ``train_accuracy`` (per step), ``accuracy`` (on the held-out set) and
        ``seconds_per_step``.
    """
    n_workers = world_size - 1
    if config.batch_size < n_workers:
        raise ValueError(
            f"batch_size={config.batch_size} is smaller than the number of workers "
            f"({n_workers}): each needs a part of every batch"
        )
    model = build_model(config.seed)
    workers = [
        rpc.remote(worker_name(rank), Worker, args=(config.seed,)) for rank in range(1, world_size)
    ]
    optimizer = DistributedOptimizer(  # type: ignore[no-untyped-call]
        torch.optim.SGD, [rpc.RRef(p) for p in model.parameters()], lr=config.lr
    )
    x, y = blobs(config.train_points, seed=config.seed)
    losses: list[float] = []
    train_accuracy: list[float] = []
    start = time.perf_counter()
    for inputs, labels in batches(x, y, config.batch_size, config.steps, config.seed):
        with dist_autograd.context() as context_id:
            # Plain tensors, not nn.Parameter: a Parameter is rebuilt on the
            # receiving side as a new leaf, which would cut the gradient path.
            weights = [p.view_as(p) for p in model.parameters()]
            futures = [
                rpc.rpc_async(
                    worker.owner(),
                    _train_step,
                    args=(worker, weights, part_x, part_y, len(inputs)),
                    timeout=config.rpc_timeout,
                )
                for worker, (part_x, part_y) in zip(
                    workers, _split(inputs, labels, n_workers), strict=True
                )
            ]
            results = [future.wait() for future in futures]
            loss = torch.stack([part_loss for part_loss, _ in results]).sum()
            dist_autograd.backward(context_id, [loss])  # type: ignore[attr-defined]
            optimizer.step(context_id)  # type: ignore[no-untyped-call]
        losses.append(loss.item())
        train_accuracy.append(sum(correct for _, correct in results) / len(inputs))
    seconds_per_step = (time.perf_counter() - start) / max(len(losses), 1)
    test_x, test_y = blobs(config.test_points, seed=config.seed + 1)
    weights = [p.detach() for p in model.parameters()]
    futures = [
        rpc.rpc_async(
            worker.owner(),
            _correct,
            args=(worker, weights, part_x, part_y),
            timeout=config.rpc_timeout,
        )
        for worker, (part_x, part_y) in zip(workers, _split(test_x, test_y, n_workers), strict=True)
    ]
    accuracy = sum(future.wait() for future in futures) / len(test_x)
    return {
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "losses": losses,
        "train_accuracy": train_accuracy,
        "accuracy": accuracy,
        "seconds_per_step": seconds_per_step,
    }


def run_process(rank: int, world_size: int, port: int, config: Config, result: str) -> None:
    """One process of the job: join RPC, train (master) or serve (workers), shut down.

    Args:
        rank: 0 for the master, 1.. for the workers.
        world_size: Number of processes.
        port: TCP port on 127.0.0.1 where the processes meet.
        config: The run.
        result: File the master saves :func:`run_master`'s result to.
    """
    torch.set_num_threads(1)
    # A warning from inside init_rpc (torch 2.14) that users of the recipe can do
    # nothing about. DistributedOptimizer's own deprecation warning (it builds
    # TorchScript functional optimizers) is forced on by torch and stays.
    warnings.filterwarnings("ignore", message=r"You are using a Backend .* as a ProcessGroup")
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://127.0.0.1:{port}",
        rpc_timeout=config.rpc_timeout,
        num_worker_threads=8,
    )
    name = MASTER if rank == 0 else worker_name(rank)
    rpc.init_rpc(  # type: ignore[no-untyped-call]
        name, rank=rank, world_size=world_size, rpc_backend_options=options
    )
    if rank != 0:
        _shut_down()  # serves the master's calls until every process is done
        return
    try:
        torch.save(run_master(config, world_size), result)
    except BaseException:
        rpc.shutdown(graceful=False)  # the launcher then ends the workers
        raise
    _shut_down()


#: How torch 2.14 reports, from ``rpc.shutdown()``, a peer that closed its connection
#: first: "DistNetworkError: Connection reset by peer", or tensorpipe's
#: "eof (this error originated at tensorpipe/...)" and "pipe closed (...)".
_PEER_LEFT = ("Connection reset by peer", "eof (this error originated", "pipe closed (this error")


def _shut_down() -> None:
    """``rpc.shutdown()``, where a peer leaving first is not a failure.

    A graceful shutdown first waits until every process has asked to shut down
    with no call outstanding; then each process's agent closes its connections.
    A peer that has closed and exited can break the connection of a process
    still waiting or closing. After a normal run nothing is lost by then: a
    failed call would have failed the master's training first. When the master
    failed, it is the master's error that says why; a worker that then failed
    too would race it to be the job's reported error (seen once in a full
    test-suite run: the worker's "eof" won). Either way the local agent is shut
    down all the same (``rpc.shutdown`` finishes it in a ``finally``), and
    :func:`launch` reports a master that failed or was killed from its exit.
    """
    try:
        rpc.shutdown()
    except RuntimeError as error:  # DistNetworkError is one
        if not any(marker in str(error) for marker in _PEER_LEFT):
            raise


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch(config: Config, world_size: int = 3, timeout: float = 300.0) -> dict[str, Any]:
    """Start the master and ``world_size - 1`` workers on this machine and train.

    Every process is ended when one fails or when ``timeout`` passes, so a
    broken run raises instead of hanging.

    Args:
        config: The run.
        world_size: Processes: one master and at least one worker.
        timeout: Seconds the whole job may take.

    Returns:
        The master's result (see :func:`run_master`).

    Raises:
        ValueError: ``world_size`` is below 2.
        TimeoutError: The job took longer than ``timeout``.
    """
    if world_size < 2:
        raise ValueError(f"world_size={world_size}: the RPC hybrid needs a master and a worker")
    # Fresh processes (not forks of a caller that may hold threads), forked
    # from a server that imports torch once rather than once per process.
    multiprocessing.get_context("forkserver").set_forkserver_preload([__name__])
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "result.pt"
        context = mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
            run_process,
            args=(world_size, _free_port(), config, str(result)),
            nprocs=world_size,
            join=False,
            start_method="forkserver",
        )
        deadline = time.monotonic() + timeout
        try:
            while not context.join(timeout=0.5):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the RPC hybrid job did not end within {timeout:.0f} s")
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
                process.join()
        loaded: dict[str, Any] = torch.load(result)
        return loaded


def train_single_process(config: Config) -> dict[str, Any]:
    """The same training in one process: the whole batch, plain ``SGD``.

    Args:
        config: The run (``rpc_timeout`` unused).

    Returns:
        ``state_dict``, ``losses``, ``accuracy`` and ``seconds_per_step``, as
        :func:`run_master` returns them.
    """
    model = build_model(config.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    x, y = blobs(config.train_points, seed=config.seed)
    losses: list[float] = []
    start = time.perf_counter()
    for inputs, labels in batches(x, y, config.batch_size, config.steps, config.seed):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), labels)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        losses.append(loss.item())
    seconds_per_step = (time.perf_counter() - start) / max(len(losses), 1)
    test_x, test_y = blobs(config.test_points, seed=config.seed + 1)
    with torch.no_grad():
        accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
    return {
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "losses": losses,
        "accuracy": accuracy,
        "seconds_per_step": seconds_per_step,
    }
