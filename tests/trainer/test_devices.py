"""Behaviours whose code differs on CUDA, each run on the CPU and on a CUDA device.

Every test takes ``device``: its "cuda" case is marked ``gpu`` and skipped without
a CUDA device (``benchmarks/gpu_check.py`` runs them on a GPU machine). Where the
CPU cannot run the CUDA path itself, the CPU case checks the CPU's side of the
same behaviour, and its docstring says so.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import trainkit
from tests.callbacks.test_precision import DtypeProbe
from tests.helpers import QUIET, Classifier, blobs, loader
from tests.recipes.test_cifar10 import CONFIG as CIFAR10_CONFIG
from tests.recipes.test_cifar10 import synthetic_cifar10  # noqa: F401 (a fixture)
from tests.utilities.test_compile import CountingClassifier
from trainkit.callbacks import MixedPrecision, ModelCheckpoint, nonfinite
from trainkit.launch.launcher import free_port

CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.gpu,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ],
)
DEVICES = ["cpu", CUDA]
# A resumed run saves into its own folder, which ModelCheckpoint rightly warns about.
OTHER_FOLDER = pytest.mark.filterwarnings("ignore:ModelCheckpoint. the checkpoint's files")


@pytest.fixture(autouse=True)
def _restore_determinism() -> Iterator[None]:
    # Trainer(deterministic=True) switches torch's global flags on; no other test
    # may inherit them.
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    yield
    torch.use_deterministic_algorithms(before[0])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[1:]


def _parameters(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return _parameters_of(module.state_dict())


class PoisonedClassifier(Classifier):
    """Dropout, and gradients set to infinity in the backward passes of ``poison_steps``.

    The loss stays finite (NonFiniteLoss has nothing to report): only the
    gradients overflow, as float16 gradients do.
    """

    def __init__(self, poison_steps: tuple[int, ...] = (), lr: float = 0.1) -> None:
        super().__init__(lr=lr)
        self.net.insert(2, torch.nn.Dropout(0.2))
        self.poison_steps = poison_steps
        self.snapshots: list[tuple[int, dict[str, torch.Tensor]]] = []

    def on_after_backward(self) -> None:
        if self.trainer.global_step in self.poison_steps:
            next(self.parameters()).grad.fill_(float("inf"))  # type: ignore[union-attr]

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.snapshots.append((self.trainer.global_step, _parameters(self)))


def _fit_resumable(
    device: str, root: Path, max_steps: int, ckpt_path: Path | None = None, **options: Any
) -> tuple[trainkit.Trainer, PoisonedClassifier]:
    """Train with a checkpoint every 3 steps (shuffled data, dropout, a fixed seed)."""
    poison = options.pop("poison_steps", ())
    torch.manual_seed(0)
    model = PoisonedClassifier(poison)
    trainer = trainkit.Trainer(
        **{**QUIET, "enable_checkpointing": True, "accelerator": device},
        max_steps=max_steps,
        seed=0,
        default_root_dir=root,
        callbacks=[ModelCheckpoint(dirpath=root, every_n_train_steps=3, save_top_k=-1)],
        **options,
    )
    trainer.fit(model, loader(blobs(384), 32, shuffle=True), ckpt_path=ckpt_path)
    return trainer, model


def _scaler(trainer: trainkit.Trainer) -> torch.amp.GradScaler:
    precision = next(cb for cb in trainer.callbacks if isinstance(cb, MixedPrecision))
    assert precision.scaler is not None
    return precision.scaler


FP16 = {
    "precision": "16-mixed",
    "gradient_clip_val": 1e-3,
    "accumulate_grad_batches": 2,
    "poison_steps": (1, 4),
}


@OTHER_FOLDER
@pytest.mark.parametrize("device", DEVICES)
def test_fp16_skips_overflowed_steps_clips_real_gradients_and_resumes_exactly(
    device: str, tmp_path: Path
) -> None:
    """16-mixed with clipping and accumulation: a step whose gradients overflow is
    skipped and halves the scale; the others clip the unscaled gradients; a run
    resumed from a checkpoint ends bit for bit where the uninterrupted run does.
    (On the CPU torch's GradScaler("cpu") and float16 autocast run the same code.)
    """
    trainer, model = _fit_resumable(device, tmp_path / "whole", 6, **FP16)
    assert trainer.global_step == 6  # 12 batches, 2 per step; skipped steps count
    # The weights after the last batch of each step (snapshots are keyed by the
    # global step reached: the last snapshot of a key is after that step's update).
    by_step = dict(model.snapshots)
    for poisoned in (1, 4):
        before, after = by_step[poisoned], by_step[poisoned + 1]
        assert all(torch.equal(before[k], after[k]) for k in before), f"step {poisoned} ran"
    # A normal step moved the weights by exactly lr * max_norm: clipping saw the
    # unscaled gradients (clipping scaled ones would shrink the step 65536-fold).
    before, after = by_step[2], by_step[3]
    moved = torch.cat([(after[k] - before[k]).flatten() for k in before]).norm()
    assert moved.item() == pytest.approx(0.1 * 1e-3, rel=1e-3)
    assert _scaler(trainer).get_scale() == 2.0**16 / 4  # halved once per overflow

    # Resumed from step 3 (between the two overflows): the same weights and scaler.
    checkpoint = next((tmp_path / "whole").glob("*step=3*.ckpt"))
    assert torch.load(checkpoint, weights_only=True)["callbacks"]["MixedPrecision"]["scaler"][
        "scale"
    ] == pytest.approx(2.0**15)
    resumed, again = _fit_resumable(device, tmp_path / "again", 6, checkpoint, **FP16)
    assert _scaler(resumed).state_dict() == _scaler(trainer).state_dict()
    final, final_again = _parameters(model), _parameters(again)
    assert all(torch.equal(final[k], final_again[k]) for k in final)


@OTHER_FOLDER
@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_resume_is_bitwise(device: str, tmp_path: Path) -> None:
    """deterministic=True: a run resumed mid-epoch (shuffle and dropout restored from
    the checkpoint's random states) ends with bit-identical weights."""
    options = {"deterministic": True}
    _, model = _fit_resumable(device, tmp_path / "whole", 8, **options)
    checkpoint = next((tmp_path / "whole").glob("*step=3*.ckpt"))
    _, again = _fit_resumable(device, tmp_path / "again", 8, checkpoint, **options)
    final, final_again = _parameters(model), _parameters(again)
    assert all(torch.equal(final[k], final_again[k]) for k in final)
    assert torch.are_deterministic_algorithms_enabled()


# precision -> (the dtype the forward computes in, the parameters' dtype)
COMPUTE_DTYPES = {
    "bf16-mixed": (torch.bfloat16, torch.float32),
    "bf16-true": (torch.bfloat16, torch.bfloat16),
    "16-true": (torch.float16, torch.float16),
    "64-true": (torch.float64, torch.float64),  # the batches cast to float64 too
}


@pytest.mark.parametrize("precision", list(COMPUTE_DTYPES))
@pytest.mark.parametrize("device", DEVICES)
def test_a_precision_computes_in_its_dtype_on_the_device(device: str, precision: str) -> None:
    torch.manual_seed(0)
    model = DtypeProbe(lr=0.2)
    initial = _parameters(model)
    trainer = trainkit.Trainer(max_steps=4, precision=precision, **{**QUIET, "accelerator": device})
    trainer.fit(model, loader(blobs(256), 32, shuffle=True))
    assert model.seen == COMPUTE_DTYPES[precision]
    assert next(model.parameters()).device.type == device
    final = _parameters(model)
    assert all(torch.isfinite(value).all() for value in final.values())
    assert any(not torch.equal(initial[k].to(final[k].dtype), final[k]) for k in final)


class BatchProbe(Classifier):
    """Records each batch's device and whether its input is the loader's tensor itself."""

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self.batches.append((batch[0].device.type, batch[0].is_pinned(), batch[0]))

    batches: list[tuple[str, bool, torch.Tensor]]


@pytest.mark.parametrize("device", DEVICES)
def test_pinned_batches_move_without_blocking(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """pin_memory=True: on CUDA every tensor of the batch is copied with
    non_blocking=True and arrives intact; on the CPU (nothing to pin, no copy) the
    batch reaches training_step without a copy at all."""
    data = blobs(64)
    moves: list[tuple[bool, bool]] = []
    original_to = torch.Tensor.to

    def recording_to(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        moves.append((self.is_pinned(), bool(kwargs.get("non_blocking", False))))
        return original_to(self, *args, **kwargs)

    model = BatchProbe()
    model.batches = []
    train = DataLoader(data, batch_size=16, pin_memory=device == "cuda")
    trainer = trainkit.Trainer(max_steps=4, **{**QUIET, "accelerator": device})
    monkeypatch.setattr(torch.Tensor, "to", recording_to)
    trainer.fit(model, train)
    monkeypatch.undo()
    assert [d for d, _, _ in model.batches] == [device] * 4
    if device == "cuda":
        batch_moves = [m for m in moves if m[0]]
        assert len(batch_moves) == 4 * 2  # inputs and labels of 4 batches
        assert all(non_blocking for _, non_blocking in batch_moves)
        for index, (_, _, x) in enumerate(model.batches):
            assert torch.equal(x.cpu(), data.tensors[0][index * 16 : (index + 1) * 16])
    else:
        for index, (_, pinned, x) in enumerate(model.batches):
            assert not pinned
            assert torch.equal(x, data.tensors[0][index * 16 : (index + 1) * 16])


@pytest.mark.parametrize("device", DEVICES)
def test_auto_accelerator_picks_cuda_exactly_when_there_is_one(device: str) -> None:
    available = torch.cuda.is_available()
    if (device == "cuda") != available:
        pytest.skip("the CPU case runs where CUDA is not available")
    trainer = trainkit.Trainer(**{**QUIET, "accelerator": "auto"})
    assert trainer.strategy.root_device.type == device
    assert trainer.num_devices == 1


@pytest.mark.parametrize("device", DEVICES)
def test_asking_for_devices_that_are_not_there_says_what_there_is(device: str) -> None:
    """On CUDA: one device more than there are names the count visible. Without CUDA:
    accelerator="cuda" says CUDA is not available and what to pass instead."""
    if device == "cuda":
        count = torch.cuda.device_count()
        with pytest.raises(ValueError, match=rf"{count} visible \(indices 0\.\.{count - 1}\)"):
            trainkit.Trainer(**{**QUIET, "accelerator": "cuda"}, devices=count + 1)
    else:
        if torch.cuda.is_available():
            pytest.skip("the CPU case runs where CUDA is not available")
        with pytest.raises(RuntimeError, match=r"CUDA is not available.*accelerator='cpu'"):
            trainkit.Trainer(**{**QUIET, "accelerator": "cuda"})


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ("1", 1),
        (" 2 ", 2),
        ("-1", -1),
        ("0,2", [0, 2]),
        ("0, 2", [0, 2]),
        ("2,", [2]),
        ((0, 1), [0, 1]),
    ],
)
def test_devices_given_as_text_or_a_config_list_are_read_as_lightning_reads_them(
    given: Any, read: Any
) -> None:
    from trainkit.trainer.options import HardwareOptions

    assert HardwareOptions(devices=given).devices == read
    omegaconf = pytest.importorskip("omegaconf")
    listed = omegaconf.OmegaConf.create({"devices": [0, 1]}).devices  # a Hydra config's
    assert HardwareOptions(devices=listed).devices == [0, 1]
    with pytest.raises(TypeError, match=r"such a string \('2', '0,1'\), got 'two'"):
        HardwareOptions(devices="two")


@pytest.mark.parametrize("device", DEVICES)
def test_devices_minus_one_is_every_gpu(device: str) -> None:
    if device == "cuda":
        trainer = trainkit.Trainer(**{**QUIET, "accelerator": "cuda"}, devices="1")
        assert trainer.num_devices == 1
        plan = trainkit.strategies.plan_devices("auto", "cuda", -1)
        assert len(plan.indices) == torch.cuda.device_count()
    else:
        assert trainkit.Trainer(**QUIET, devices="1").num_devices == 1
        with pytest.raises(ValueError, match=r"devices=-1 asks for every GPU.*on the CPU"):
            trainkit.Trainer(**QUIET, devices=-1)


@pytest.mark.parametrize("device", DEVICES)
def test_ddp_with_one_process_trains_as_one_device(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """strategy="ddp", devices=1 in this process: it trains in a process group over
    NCCL on CUDA (gloo on the CPU), and the weights equal a single-device run's."""
    results, wrapped = [], []
    for strategy in ("single_device", "ddp"):
        torch.manual_seed(0)
        model = Classifier(lr=0.2)
        trainer = trainkit.Trainer(
            **{**QUIET, "accelerator": device}, strategy=strategy, devices=1, max_steps=5
        )
        if strategy == "ddp":
            _in_a_group_of_one(monkeypatch)
            model.on_train_start = lambda: wrapped.append(  # type: ignore[method-assign]
                torch.distributed.get_backend()
            )
        try:
            trainer.fit(model, loader(blobs(160), 32))
        finally:
            if torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()
        results.append(_parameters(model))
    assert type(trainer.strategy).__name__ == "DDPStrategy"
    assert wrapped == ["nccl" if device == "cuda" else "gloo"]
    for key, value in results[0].items():
        torch.testing.assert_close(results[1][key], value, rtol=1e-5, atol=1e-6)


def _in_a_group_of_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process is rank 0 of a job of one, as torchrun --nproc-per-node 1 would say."""
    environment = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    environment |= {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    for key, value in environment.items():
        monkeypatch.setenv(key, value)


class FullState(trainkit.Callback):
    """The module's full state at the end of fit, gathered while the process group is up."""

    def __init__(self) -> None:
        self.state: dict[str, torch.Tensor] = {}

    def on_train_end(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        from trainkit.distributed.sharding import full_model_state

        state = full_model_state(module) if torch.distributed.is_initialized() else None
        self.state = _parameters(module) if state is None else _parameters_of(state)


def _parameters_of(state: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {name: value.detach().cpu().clone() for name, value in state.items()}


def _against_one_device(
    device: str,
    strategy: Any,
    monkeypatch: pytest.MonkeyPatch,
    build: Any = Classifier,
    **options: Any,
) -> tuple[trainkit.Trainer, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The final weights of ``strategy`` and of one device, same seed, data and steps."""
    results = []
    for current in ("single_device", strategy):
        torch.manual_seed(0)
        model = build()
        if current not in ("single_device", "dp"):  # the strategies of a process group
            _in_a_group_of_one(monkeypatch)
        state = FullState()
        trainer = trainkit.Trainer(
            **{**QUIET, "accelerator": device},
            strategy=current,
            devices=1,
            max_steps=5,
            callbacks=[state],
            **options,
        )
        try:
            trainer.fit(model, loader(blobs(160), 32))
        finally:
            if torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()
        results.append(state.state)
    return trainer, results[0], results[1]


def _assert_same(
    actual: dict[str, torch.Tensor],
    expected: dict[str, torch.Tensor],
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> None:
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, rtol=rtol, atol=atol, msg=key)


@pytest.mark.parametrize("device", DEVICES)
def test_dataparallel_on_one_device_trains_as_one_device(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """strategy="dp" with devices=1: nothing to split a batch over, so it says so and
    trains on the one device asked for; the weights equal a single-device run's."""
    with pytest.warns(UserWarning, match=rf"training on one device \({device}"):
        trainer, expected, got = _against_one_device(device, "dp", monkeypatch)
    assert type(trainer.strategy).__name__ == "SingleDeviceStrategy"
    assert trainer.strategy.root_device.type == device
    _assert_same(got, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_fsdp_with_one_process_trains_as_one_device(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """strategy="fsdp", devices=1 in this process: the parameters are sharded (over one
    process: NCCL on CUDA, gloo on the CPU); the gathered weights equal a
    single-device run's."""
    trainer, expected, got = _against_one_device(device, "fsdp", monkeypatch)
    assert type(trainer.strategy).__name__ == "FSDPStrategy"
    assert trainer.strategy.root_device.type == device
    _assert_same(got, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_model_parallel_with_one_process_trains_validates_and_reloads_as_one_device(
    device: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ModelParallelStrategy over a 1 x 1 mesh in this process (NCCL on CUDA, gloo on
    the CPU): the module's tensor-parallel and FSDP2 layout, applied in its
    configure_model, trains with validation inside fit and writes a sharded
    checkpoint that validate(ckpt_path="last") loads back; the weights and both
    validation losses equal a single-device run's."""
    from torch.distributed.tensor import DTensor

    from tests.distributed.model_parallel_workers import TensorParallelMlp
    from trainkit.strategies.model_parallel import ModelParallelStrategy

    runs = []
    for parallel in (False, True):
        torch.manual_seed(0)
        model = TensorParallelMlp()
        if parallel:
            _in_a_group_of_one(monkeypatch)
        state = FullState()
        trainer = trainkit.Trainer(
            **{**QUIET, "accelerator": device, "enable_checkpointing": parallel},
            strategy=ModelParallelStrategy() if parallel else "single_device",
            devices=1,
            max_steps=6,
            default_root_dir=tmp_path / str(parallel),
            callbacks=[state],
        )
        validation = loader(blobs(64, seed=1), 32)
        try:
            trainer.fit(model, loader(blobs(192), 32), validation)
            in_fit = float(trainer.callback_metrics["val/loss"])
            weight = model.up.weight
            reloaded = trainer.validate(
                model, validation, ckpt_path="last" if parallel else None, verbose=False
            )[0]["val/loss"]
        finally:
            if torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()
        assert isinstance(weight, DTensor) == parallel
        assert weight.device.type == device
        runs.append((state.state, in_fit, reloaded))
    assert model.mesh_seen == ("data_parallel", "tensor_parallel")
    assert Path(trainer.checkpoint_callback.last_model_path).is_dir()  # sharded
    (expected, *losses), (got, *parallel_losses) = runs
    # The same math in another order (a matmul, then the bias once the partial sums
    # are reduced), which AdamW's normalised steps amplify: the multi-process tests'
    # tolerance.
    _assert_same(got, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(parallel_losses, losses, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_hybrid_stages_on_one_device_train_as_one_device(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pipelined stages on the same device (``stage_devices=["cuda:0", "cuda:0"]``;
    on the CPU ``["cpu", "cpu"]``) in a process group of one, two micro-batches: the
    weights equal a single-device run's, and each stage ran on that device."""
    from tests.distributed.hybrid_workers import EightLayers
    from trainkit.strategies.hybrid import HybridStrategy

    stage = "cuda:0" if device == "cuda" else "cpu"
    strategy = HybridStrategy(stage_devices=[stage, stage], micro_batches=2)
    trainer, expected, got = _against_one_device(device, strategy, monkeypatch, EightLayers)
    assert trainer.strategy is strategy
    assert strategy.stage_devices == [torch.device(stage)] * 2
    assert strategy.partition is not None and len(strategy.partition.sizes) == 2
    _assert_same(got, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_trains_like_eager(device: str, tmp_path: Path) -> None:
    """compile=True on CUDA (inductor); on the CPU the same trainkit path with
    torch.compile's "eager" backend, as inductor's CPU compile would take most of
    this file's time budget (tests/test_compile.py covers inductor on the CPU)."""
    torch._dynamo.reset()
    compile_option: Any = True if device == "cuda" else {"backend": "eager"}
    results = []
    CountingClassifier.compiled_calls = 0
    for option in (False, compile_option):
        torch.manual_seed(0)
        model = CountingClassifier(lr=0.2)
        trainer = trainkit.Trainer(max_steps=6, compile=option, **{**QUIET, "accelerator": device})
        trainer.fit(model, loader(blobs(192), 32))
        results.append(_parameters(model))
    assert CountingClassifier.compiled_calls > 0
    for key, value in results[0].items():
        torch.testing.assert_close(results[1][key], value, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_cifar10_recipe_config_runs_a_few_steps(
    device: str,
    synthetic_cifar10: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The recipe's own config (precision 16-mixed, its callbacks and schedule)
    through the `trainkit fit` command on synthetic files in CIFAR-10's format;
    on the CPU with a narrower network so that it stays quick."""
    from trainkit.cli.main import main

    overrides = [
        f"trainer.accelerator={device}",
        f"trainer.default_root_dir={tmp_path / 'run'}",
        "trainer.max_epochs=1",
        "trainer.limit_train_batches=3",
        "trainer.limit_val_batches=1",
        "trainer.log_every_n_steps=1",
        "trainer.enable_progress_bar=false",
        f"data.init_args.data_dir={synthetic_cifar10}",
        "data.init_args.num_workers=0",
        "data.init_args.batch_size=16",
        "data.init_args.val_size=20",
    ]
    if device == "cpu":
        overrides.append("model.init_args.width=8")
    assert main(["fit", str(CIFAR10_CONFIG), *overrides]) == 0
    checkpoints = list((tmp_path / "run").rglob("*.ckpt"))
    assert checkpoints
    saved = torch.load(checkpoints[0], weights_only=True)
    assert saved["loop"]["global_step"] == 3
    assert saved["callbacks"]["MixedPrecision"]["scaler"] is not None  # 16-mixed ran


# What reads a tensor's value on the host: on a GPU each one waits for the device.
SYNCING_CALLS = ("item", "cpu", "tolist", "numpy", "__bool__", "__float__", "__int__")


class SyncGuard(trainkit.Callback):
    """Armed from the start of each step that is not a logging step until the next step starts.

    On the CPU it records every value read (``SYNCING_CALLS``) made while armed,
    with the line outside torch that made it; on CUDA torch's sync debug mode
    raises at any synchronising call while armed. Reads made by the progress bar
    when it draws (it reads the metrics only then) are counted apart.
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self.armed = False
        self.found: list[str] = []
        self.bar_reads = 0
        self.armed_steps = 0

    def _arm(self, armed: bool) -> None:
        self.armed = armed
        if self.device == "cuda":
            torch.cuda.set_sync_debug_mode("error" if armed else 0)

    def setup(self, trainer: trainkit.Trainer, module: trainkit.Module, stage: str) -> None:
        bar = trainer.progress_bar_callback
        assert bar is not None
        draw = bar.get_metrics

        def counted_draw(*args: Any) -> Any:
            self.bar_reads += 1
            armed, self.armed = self.armed, False
            try:
                if self.device == "cuda":
                    torch.cuda.set_sync_debug_mode(0)
                return draw(*args)
            finally:
                self._arm(armed)

        bar.get_metrics = counted_draw  # type: ignore[method-assign]

    def on_train_batch_start(
        self, trainer: trainkit.Trainer, module: trainkit.Module, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step + 1  # the step this batch makes (no accumulation here)
        logging_step = step % trainer.log_every_n_steps == 0
        self.armed_steps += not logging_step
        self._arm(not logging_step)

    def on_train_end(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
        self._arm(False)

    def on_exception(
        self, trainer: trainkit.Trainer, module: trainkit.Module, exception: BaseException
    ) -> None:
        self._arm(False)

    def record(self, name: str) -> None:
        if self.armed:
            caller = next(
                frame
                for frame in reversed(traceback.extract_stack()[:-2])
                if "/torch/" not in frame.filename
            )
            self.found.append(f"Tensor.{name} at {caller.filename}:{caller.lineno}")


@pytest.mark.parametrize("device", DEVICES)
def test_no_host_sync_in_steps_between_logging_steps(
    device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default Trainer (TensorBoard logger, progress bar, model summary,
    checkpointing, the NaN check) and a module that logs its loss to the bar every
    step: 100 steps, and no step but the logging ones (every log_every_n_steps=50)
    reads a value from the device. On the CPU the value reads are counted, on CUDA
    torch's sync debug mode raises at any synchronising call."""
    guard = SyncGuard(device)
    if device == "cpu":
        for name in SYNCING_CALLS:
            original = getattr(torch.Tensor, name)

            def recorded(
                self: torch.Tensor, *args: Any, _name: str = name, _f: Any = original
            ) -> Any:
                guard.record(_name)
                return _f(self, *args)

            monkeypatch.setattr(torch.Tensor, name, recorded)
        # The counting itself works: an armed guard sees a read (and `if tensor:`).
        guard.armed = True
        if torch.ones(()).item() and torch.ones(()):
            guard.armed = False
        assert [entry.split(" at ")[0] for entry in guard.found] == [
            "Tensor.item",
            "Tensor.__bool__",
        ]
        guard.found.clear()
        # The NaN check reads each CPU loss at once (no synchronisation there); its
        # accelerator path, which must read none between checks, is the one to count.
        monkeypatch.setattr(nonfinite, "READ_CPU_LOSSES_AT_ONCE", False)
    torch.manual_seed(0)
    trainer = trainkit.Trainer(
        accelerator=device, max_steps=100, default_root_dir=tmp_path, callbacks=[guard]
    )
    assert trainer.log_every_n_steps == 50  # the default this test is about
    train = DataLoader(blobs(100 * 32), batch_size=32, pin_memory=device == "cuda")
    try:
        trainer.fit(Classifier(), train)
    finally:
        if device == "cuda":
            torch.cuda.set_sync_debug_mode(0)
    monkeypatch.undo()
    assert trainer.global_step == 100 and guard.armed_steps == 98
    assert guard.found == []
    # The bar reads the metrics only when it draws: in plain mode (output captured)
    # every 50 batches and at the epoch's end, in a terminal at most every 0.1 s.
    assert guard.bar_reads <= 100 // 50 + 1 or not trainer.progress_bar_callback.is_plain
    assert list(tmp_path.rglob("*.ckpt")) and list(tmp_path.rglob("events.out.tfevents*"))
