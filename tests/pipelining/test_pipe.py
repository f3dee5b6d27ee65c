"""PipelinedSequential: same answer and same checkpoints as the un-split Sequential."""

from __future__ import annotations

import copy
from collections import OrderedDict

import pytest
import torch
from torch import nn

from trainkit.pipelining.pipe import PipelinedSequential

SPLITS = [(8,), (4, 4), (3, 5), (2, 2, 2, 2)]


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(6, 16),
        nn.ReLU(),
        nn.Linear(16, 16),
        nn.Tanh(),
        nn.Linear(16, 16),
        nn.ReLU(),
        nn.Linear(16, 3),
        nn.Tanh(),
    )


def _pipelined(
    layers: nn.Sequential, sizes: tuple[int, ...], micro_batches: int
) -> PipelinedSequential:
    return PipelinedSequential(layers, sizes, ["cpu"] * len(sizes), micro_batches)


def _assert_same_step(
    reference: nn.Module, pipelined: nn.Module, batch: torch.Tensor, target: torch.Tensor
) -> None:
    expected = reference(batch)
    actual = pipelined(batch)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    torch.autograd.backward(nn.functional.mse_loss(expected, target))
    torch.autograd.backward(nn.functional.mse_loss(actual, target))
    for (name, want), (_, got) in zip(
        reference.named_parameters(), pipelined.named_parameters(), strict=True
    ):
        assert got.grad is not None, name
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("micro_batches", [1, 2, 3, 4])
@pytest.mark.parametrize("sizes", SPLITS)
def test_output_and_gradients_match_unsplit_model(
    sizes: tuple[int, ...], micro_batches: int
) -> None:
    reference = _mlp()
    pipelined = _pipelined(copy.deepcopy(reference), sizes, micro_batches)
    # 10 rows: not divisible by 3 or 4, so the chunks are uneven.
    batch, target = torch.randn(10, 6), torch.randn(10, 3)
    _assert_same_step(reference, pipelined, batch, target)


def test_batch_smaller_than_micro_batches_runs_one_row_per_chunk() -> None:
    reference = _mlp()
    pipelined = _pipelined(copy.deepcopy(reference), (4, 4), micro_batches=4)
    seen: list[int] = []
    pipelined[0].register_forward_hook(lambda _m, inputs, _o: seen.append(inputs[0].shape[0]))
    _assert_same_step(reference, pipelined, torch.randn(3, 6), torch.randn(3, 3))
    assert seen == [1, 1, 1]


def test_state_dict_is_the_unsplit_models() -> None:
    reference = _mlp()
    pipelined = _pipelined(copy.deepcopy(reference), (3, 5), micro_batches=2)
    expected, actual = reference.state_dict(), pipelined.state_dict()
    assert list(actual) == list(expected)
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key], rtol=0, atol=0)
    assert [name for name, _ in pipelined.named_modules()] == [
        name for name, _ in reference.named_modules()
    ]


def test_state_dict_loads_in_both_directions() -> None:
    unsplit = _mlp()
    pipelined = _pipelined(copy.deepcopy(unsplit), (2, 2, 2, 2), micro_batches=2)
    for parameter in pipelined.parameters():
        nn.init.normal_(parameter)
    unsplit.load_state_dict(pipelined.state_dict())
    batch = torch.randn(5, 6)
    torch.testing.assert_close(unsplit(batch), pipelined(batch), rtol=1e-5, atol=1e-6)

    fresh = _mlp()
    pipelined.load_state_dict(fresh.state_dict())
    torch.testing.assert_close(pipelined(batch), fresh(batch), rtol=1e-5, atol=1e-6)


def test_keeps_ordered_dict_names() -> None:
    layers = nn.Sequential(
        OrderedDict(encoder=nn.Linear(4, 4), act=nn.ReLU(), head=nn.Linear(4, 2))
    )
    keys = list(layers.state_dict())
    pipelined = PipelinedSequential(layers, [1, 2], ["cpu", "cpu"])
    assert list(pipelined.state_dict()) == keys
    assert list(pipelined._modules) == ["encoder", "act", "head"]
    assert pipelined.stages == [[layers.encoder], [layers.act, layers.head]]
    assert "stages=[encoder @ cpu, act..head @ cpu]" in repr(pipelined)


def test_accepts_a_list_of_layers_and_exposes_the_split() -> None:
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)]
    pipelined = PipelinedSequential(layers, [2, 1], ["cpu", torch.device("cpu")], 3)
    assert list(pipelined._modules) == ["0", "1", "2"]
    assert pipelined.sizes == (2, 1)
    assert pipelined.devices == (torch.device("cpu"), torch.device("cpu"))
    assert pipelined.micro_batches == 3
    assert pipelined.output_device == torch.device("cpu")
    assert pipelined.stages == [layers[:2], layers[2:]]
    assert "micro_batches=3, stages=[0..1 @ cpu, 2 @ cpu]" in repr(pipelined)
    # A slice is a plain, un-pipelined Sequential of the same layers.
    head = pipelined[1:]
    assert type(head) is nn.Sequential
    assert list(head) == layers[1:]
    assert pipelined[-1] is layers[2]


class _Recorder(nn.Module):
    """Appends (stage, micro-batch) to a log; each micro-batch is one row holding its index."""

    def __init__(self, stage: int, log: list[tuple[int, int]]) -> None:
        super().__init__()
        self.stage = stage
        self.log = log

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.log.append((self.stage, int(x[0, 0])))
        return x


def test_runs_the_wavefront_schedule() -> None:
    log: list[tuple[int, int]] = []
    layers = [_Recorder(stage, log) for stage in range(3)]
    pipelined = PipelinedSequential(layers, [1, 1, 1], ["cpu"] * 3, micro_batches=4)
    output = pipelined(torch.arange(4.0).unsqueeze(1))
    torch.testing.assert_close(output, torch.arange(4.0).unsqueeze(1))
    # Tick t runs stage j on micro-batch t - j.
    assert log == [
        (0, 0),
        (0, 1), (1, 0),
        (0, 2), (1, 1), (2, 0),
        (0, 3), (1, 2), (2, 1),
        (1, 3), (2, 2),
        (2, 3),
    ]  # fmt: skip


def _batch_norm_model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def test_batch_norm_differs_per_micro_batch_in_train_mode_only() -> None:
    torch.manual_seed(1)
    batch = torch.randn(8, 4) * torch.linspace(0.1, 3.0, 8).unsqueeze(1)
    whole = _pipelined(_batch_norm_model(), (2, 2), micro_batches=1)
    split = _pipelined(_batch_norm_model(), (2, 2), micro_batches=2)

    whole_out, split_out = whole(batch), split(batch)
    assert not torch.allclose(whole_out, split_out, rtol=1e-3, atol=1e-3)
    # Running statistics were updated once per micro-batch, from different rows.
    whole_state, split_state = whole.state_dict(), split.state_dict()
    assert not torch.allclose(whole_state["1.running_mean"], split_state["1.running_mean"])
    assert int(split_state["1.num_batches_tracked"]) == 2

    split.load_state_dict(whole.state_dict())
    whole.eval()
    split.eval()
    torch.testing.assert_close(split(batch), whole(batch), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("layers", "sizes", "devices", "micro_batches", "error", "match"),
    [
        ([], [], [], 1, ValueError, "at least one layer"),
        ([nn.ReLU(), "relu"], [2], ["cpu"], 1, TypeError, "not an nn.Module"),
        ([nn.ReLU()], [], [], 1, ValueError, "sizes is empty"),
        ([nn.ReLU()] * 2, [1, 1], ["cpu"], 1, ValueError, "one device per stage"),
        ([nn.ReLU()] * 2, [2, 0], ["cpu", "cpu"], 1, ValueError, "drop the empty stages"),
        ([nn.ReLU()] * 2, [3], ["cpu"], 1, ValueError, "add up to 2"),
        ([nn.ReLU()] * 2, [1], ["cpu"], 1, ValueError, "add up to 2"),
        ([nn.ReLU()], [1], ["cpu"], 0, ValueError, "micro_batches must be"),
    ],
)
def test_rejects_bad_arguments(
    layers: list[nn.Module],
    sizes: list[int],
    devices: list[str],
    micro_batches: int,
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match):
        PipelinedSequential(layers, sizes, devices, micro_batches)


def test_rejects_inputs_other_than_one_tensor() -> None:
    pipelined = PipelinedSequential([nn.ReLU()], [1], ["cpu"], micro_batches=2)
    with pytest.raises(TypeError, match="one tensor from stage to stage"):
        pipelined((torch.zeros(2), torch.zeros(2)))
    with pytest.raises(TypeError, match="got 2 inputs"):
        pipelined(torch.zeros(2), torch.zeros(2))


class _ToPair(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, x


def test_rejects_a_stage_that_returns_no_tensor() -> None:
    pipelined = PipelinedSequential([_ToPair(), nn.ReLU()], [1, 1], ["cpu", "cpu"])
    with pytest.raises(TypeError, match="stage 0 of PipelinedSequential returned tuple"):
        pipelined(torch.zeros(2, 2))


def test_rejects_layers_added_after_construction() -> None:
    pipelined = PipelinedSequential([nn.ReLU(), nn.ReLU()], [1, 1], ["cpu", "cpu"])
    pipelined.append(nn.ReLU())
    with pytest.raises(RuntimeError, match="3 layers but its stages hold 2"):
        pipelined(torch.zeros(2, 2))


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_two_gpus_match_the_unsplit_model() -> None:
    reference = _mlp()
    pipelined = PipelinedSequential(copy.deepcopy(reference), [3, 5], ["cuda:0", "cuda:1"], 4)
    assert pipelined[0].weight.device == torch.device("cuda:0")
    assert pipelined[6].weight.device == torch.device("cuda:1")
    batch, target = torch.randn(10, 6), torch.randn(10, 3)
    output = pipelined(batch.to("cuda:0"))
    assert output.device == torch.device("cuda:1")
    torch.testing.assert_close(output.cpu(), reference(batch), rtol=1e-4, atol=1e-5)
    torch.autograd.backward(nn.functional.mse_loss(output, target.to("cuda:1")))
    torch.autograd.backward(nn.functional.mse_loss(reference(batch), target))
    for want, got in zip(reference.parameters(), pipelined.parameters(), strict=True):
        assert got.grad is not None
        torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_to_cpu_stage_is_exact() -> None:
    # The copy back to the CPU must not be asynchronous, or the CPU stage reads garbage.
    reference = _mlp()
    pipelined = PipelinedSequential(copy.deepcopy(reference), [6, 2], ["cuda:0", "cpu"], 4)
    batch = torch.randn(64, 6)
    output = pipelined(batch)
    assert output.device == torch.device("cpu")
    torch.testing.assert_close(output, reference(batch), rtol=1e-4, atol=1e-5)
