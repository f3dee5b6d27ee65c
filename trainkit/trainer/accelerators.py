"""The devices a run computes on, as objects: Lightning's ``Accelerator`` API.

trainkit chooses devices from ``Trainer(accelerator="cpu" | "cuda" | "auto")``;
these classes answer the questions Lightning code asks about them
(``CUDAAccelerator.is_available()``, ``trainer.accelerator.get_device_stats(device)``,
``find_usable_cuda_devices(2)``), and an instance may be passed as
``Trainer(accelerator=CUDAAccelerator())``, meaning its name.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "Accelerator",
    "CPUAccelerator",
    "CUDAAccelerator",
    "MPSAccelerator",
    "accelerator_for",
    "find_usable_cuda_devices",
]


class Accelerator:
    """One kind of device: whether it is here, how many, and their figures."""

    def setup_device(self, device: torch.device) -> None:
        """Prepare ``device`` for this process (nothing to do on the CPU)."""

    def setup(self, trainer: Any) -> None:
        """Called once the Trainer is set up (nothing to do)."""

    def teardown(self) -> None:
        """Give back what the device holds for this process (nothing on the CPU)."""

    def get_device_stats(self, device: torch.device | str | int) -> dict[str, Any]:
        """The device's figures, as ``DeviceStatsMonitor`` logs them."""
        from trainkit.callbacks.device_stats import device_stats

        return dict(device_stats(self._device(device)))

    def _device(self, device: torch.device | str | int) -> torch.device:
        return torch.device(device) if not isinstance(device, int) else torch.device("cpu")

    @staticmethod
    def parse_devices(devices: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def get_parallel_devices(devices: Any) -> list[torch.device]:
        raise NotImplementedError

    @staticmethod
    def auto_device_count() -> int:
        raise NotImplementedError

    @staticmethod
    def is_available() -> bool:
        raise NotImplementedError

    @staticmethod
    def name() -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class CPUAccelerator(Accelerator):
    """The CPU: always here; ``devices`` counts processes."""

    @staticmethod
    def parse_devices(devices: int | str) -> int:
        """``devices`` as a number of processes ("auto": 1).

        Raises:
            ValueError: not a positive number or "auto".
        """
        if devices == "auto":
            return 1
        count = int(devices) if isinstance(devices, (int, str)) and str(devices).isdigit() else 0
        if count < 1:
            raise ValueError(
                f"devices={devices!r} on the CPU must be a positive number of processes or 'auto'."
            )
        return count

    @staticmethod
    def get_parallel_devices(devices: int | str) -> list[torch.device]:
        return [torch.device("cpu")] * CPUAccelerator.parse_devices(devices)

    @staticmethod
    def auto_device_count() -> int:
        return 1

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def name() -> str:
        return "cpu"


class CUDAAccelerator(Accelerator):
    """NVIDIA GPUs through CUDA."""

    def setup_device(self, device: torch.device) -> None:
        """Make ``device`` this process's current CUDA device.

        Raises:
            ValueError: ``device`` is not a CUDA device.
        """
        if device.type != "cuda":
            raise ValueError(f"CUDAAccelerator.setup_device({device}): a CUDA device is needed.")
        torch.cuda.set_device(device)

    def teardown(self) -> None:
        torch.cuda.empty_cache()

    def _device(self, device: torch.device | str | int) -> torch.device:
        return torch.device("cuda", device) if isinstance(device, int) else torch.device(device)

    @staticmethod
    def parse_devices(devices: int | str | list[int]) -> list[int] | None:
        """The CUDA indices ``devices`` names: a count, "auto"/-1 (all), "0,2", or a list.

        Returns:
            The indices, or None for ``devices=0``.

        Raises:
            ValueError: an index this machine does not have, or a count above its GPUs.
        """
        count = CUDAAccelerator.auto_device_count()
        if devices in ("auto", -1, "-1"):
            indices = list(range(count))
        elif isinstance(devices, str) and "," in devices:
            indices = [int(part) for part in devices.split(",") if part.strip()]
        elif isinstance(devices, (list, tuple)):
            indices = [int(index) for index in devices]
        else:
            number = int(devices)
            if number == 0:
                return None
            indices = list(range(number))
        missing = [index for index in indices if not 0 <= index < count]
        if missing or not indices:
            raise ValueError(
                f"devices={devices!r} names CUDA device(s) {missing or indices}, but this machine "
                f"has {count}. Ask for at most {count}, or run on the CPU (accelerator='cpu')."
            )
        return indices

    @staticmethod
    def get_parallel_devices(devices: list[int]) -> list[torch.device]:
        return [torch.device("cuda", index) for index in devices]

    @staticmethod
    def auto_device_count() -> int:
        return torch.cuda.device_count()

    @staticmethod
    def is_available() -> bool:
        return torch.cuda.device_count() > 0

    @staticmethod
    def name() -> str:
        return "cuda"


class MPSAccelerator(Accelerator):
    """Apple's Metal GPUs: reported, not run on (trainkit computes on the CPU and CUDA)."""

    @staticmethod
    def auto_device_count() -> int:
        return 1 if MPSAccelerator.is_available() else 0

    @staticmethod
    def is_available() -> bool:
        mps = getattr(torch.backends, "mps", None)
        return bool(mps is not None and mps.is_available())

    @staticmethod
    def name() -> str:
        return "mps"


def accelerator_for(device_type: str) -> Accelerator:
    """The accelerator of a device type ("cpu" or "cuda")."""
    return CUDAAccelerator() if device_type == "cuda" else CPUAccelerator()


def find_usable_cuda_devices(num_devices: int = -1) -> list[int]:
    """The indices of ``num_devices`` CUDA devices that take a tensor (-1: all that do).

    A device another process holds in exclusive mode, or one that is broken, fails
    to take a tensor and is skipped.

    Raises:
        ValueError: fewer usable devices than ``num_devices``.

    Example:
        >>> find_usable_cuda_devices(0)
        []
    """
    if num_devices == 0:
        return []
    usable = []
    for index in range(torch.cuda.device_count()):
        try:
            torch.tensor(0, device=torch.device("cuda", index))
        except RuntimeError:
            continue
        usable.append(index)
        if len(usable) == num_devices:
            break
    if num_devices > 0 and len(usable) < num_devices:
        raise ValueError(
            f"find_usable_cuda_devices({num_devices}): only {len(usable)} of this machine's "
            f"{torch.cuda.device_count()} CUDA device(s) took a tensor; ask for fewer, or free "
            "the others (another process may hold them in exclusive mode)."
        )
    return usable
