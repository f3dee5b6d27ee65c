"""Lightning's Accelerator objects: the questions they answer, and as Trainer(accelerator=...)."""

from __future__ import annotations

import pytest
import torch

import trainkit
from tests.helpers import QUIET, Classifier, blobs, loader
from trainkit.lightning.accelerators import (
    CPUAccelerator,
    CUDAAccelerator,
    MPSAccelerator,
    find_usable_cuda_devices,
)

NO_CUDA = not torch.cuda.is_available()
QUIET_AUTO = {key: value for key, value in QUIET.items() if key != "accelerator"}


def test_an_accelerator_object_means_its_name() -> None:
    trainer = trainkit.Trainer(accelerator=CPUAccelerator(), max_steps=1, **QUIET_AUTO)
    trainer.fit(Classifier(), loader(blobs(32)))
    assert trainer.global_step == 1
    assert isinstance(trainer.accelerator, CPUAccelerator)
    assert trainer.accelerator.name() == "cpu"


def test_an_accelerator_trainkit_does_not_run_on_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="Unknown accelerator 'mps'; valid accelerators are"):
        trainkit.Trainer(accelerator=MPSAccelerator(), **QUIET_AUTO)


def test_the_cpu_answers() -> None:
    assert CPUAccelerator.is_available() and CPUAccelerator.auto_device_count() == 1
    assert CPUAccelerator.parse_devices("auto") == 1 and CPUAccelerator.parse_devices(3) == 3
    assert CPUAccelerator.get_parallel_devices(2) == [torch.device("cpu")] * 2
    with pytest.raises(ValueError, match="positive number of processes"):
        CPUAccelerator.parse_devices(0)


def test_cuda_answers_for_this_machine() -> None:
    count = torch.cuda.device_count()
    assert CUDAAccelerator.is_available() == (count > 0)
    assert CUDAAccelerator.auto_device_count() == count
    assert CUDAAccelerator.parse_devices(0) is None
    assert CUDAAccelerator.get_parallel_devices([0, 1]) == [
        torch.device("cuda", 0),
        torch.device("cuda", 1),
    ]
    with pytest.raises(ValueError, match=f"but this machine has {count}"):
        CUDAAccelerator.parse_devices(count + 1)
    assert find_usable_cuda_devices(0) == []
    with pytest.raises(ValueError, match=f"only {count} of this machine's"):
        find_usable_cuda_devices(count + 1)


def test_the_trainers_accelerator_follows_its_device() -> None:
    expected = CPUAccelerator if NO_CUDA else CUDAAccelerator
    assert type(trainkit.Trainer(**QUIET_AUTO).accelerator) is expected
    assert type(trainkit.Trainer(**QUIET).accelerator) is CPUAccelerator  # accelerator="cpu"


def test_cpu_device_stats_are_the_monitors() -> None:
    pytest.importorskip("psutil")
    stats = CPUAccelerator().get_device_stats("cpu")
    assert set(stats) >= {"cpu_percent", "cpu_vm_percent", "cpu_swap_percent"}


@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
def test_cuda_device_stats_and_parsing_on_a_gpu() -> None:
    assert CUDAAccelerator.parse_devices("auto") == list(range(torch.cuda.device_count()))
    assert find_usable_cuda_devices(1) == [0]
    torch.zeros(1, device="cuda")
    assert "allocated_bytes.all.current" in CUDAAccelerator().get_device_stats(0)
