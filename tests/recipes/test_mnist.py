"""The MNIST recipe: data loading (and its offline error), and a full training run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from recipes.mnist import data as mnist_data
from recipes.mnist import train

DATA_DIR = os.environ.get("TRAINKIT_DATA_DIR") or str(
    Path(__file__).resolve().parents[3] / "shared" / "data"
)
HAVE_MNIST = all((Path(DATA_DIR) / "MNIST" / "raw" / f).exists() for f in mnist_data.FILES)
needs_mnist = pytest.mark.skipif(not HAVE_MNIST, reason=f"MNIST files not in {DATA_DIR}")


def test_missing_files_offline_name_the_folder_and_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchvision.datasets import MNIST

    def no_network(self: MNIST) -> None:
        raise OSError("network is unreachable")

    # The real download path runs; only the network call itself fails, as offline.
    monkeypatch.setattr(MNIST, "download", no_network)
    with pytest.raises(FileNotFoundError) as info:
        mnist_data.load_mnist(tmp_path, train=True)
    message = str(info.value)
    assert str(tmp_path / "MNIST" / "raw") in message
    assert all(name in message for name in mnist_data.FILES)
    assert "TRAINKIT_DATA_DIR" in message


def test_offline_without_data_the_cli_prints_one_line_and_leaves_no_empty_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchvision.datasets import MNIST

    from trainkit.cli.main import main

    def no_network(self: MNIST) -> None:
        raise OSError("network is unreachable")

    monkeypatch.setattr(MNIST, "download", no_network)
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    data = tmp_path / "data"
    monkeypatch.setenv("TRAINKIT_DATA_DIR", str(data))
    root = f"trainer.default_root_dir={tmp_path / 'runs'}"
    assert main(["fit", "recipes/mnist/config.yaml", root, "trainer.max_epochs=1"]) == 2
    captured = capsys.readouterr()
    output = captured.out + captured.err
    (line,) = [line for line in output.splitlines() if "trainkit: error:" in line]
    assert line.startswith(f"trainkit: error: MNIST is not in {data / 'MNIST' / 'raw'}")
    assert "TRAINKIT_DATA_DIR" in line and "Traceback" not in output
    assert not data.exists()  # no empty MNIST/raw (or data folder) left behind
    # A data folder that existed stays; only the folders the failed download made go.
    data.mkdir()
    with pytest.raises(mnist_data.MNISTNotFound):
        mnist_data.load_mnist(data, train=False)
    assert list(data.iterdir()) == []


def test_data_dir_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_DATA_DIR", "/somewhere/data")
    assert mnist_data.MNISTData().data_dir == Path("/somewhere/data")
    monkeypatch.delenv("TRAINKIT_DATA_DIR")
    assert mnist_data.default_data_dir() == Path.home() / ".cache" / "trainkit" / "data"


@needs_mnist
def test_loading_normalises_the_real_files() -> None:
    images, labels = mnist_data.load_mnist(Path(DATA_DIR), train=False)
    assert images.shape == (10_000, 1, 28, 28) and labels.shape == (10_000,)
    assert images.dtype == torch.float32 and labels.dtype == torch.int64
    assert abs(images.mean().item()) < 0.1  # roughly centred by the standard normalisation


@needs_mnist
def test_short_run_end_to_end(tmp_path: Path) -> None:
    result = train.main(
        [
            "--max-epochs",
            "1",
            "--limit-train-batches",
            "30",
            "--data-dir",
            DATA_DIR,
            "--root-dir",
            str(tmp_path),
        ]
    )
    assert result["test/acc"] > 0.8
    assert list((tmp_path / "logs" / "version_0").glob("events.out.tfevents.*"))


@pytest.mark.slow
@needs_mnist
def test_the_cli_trains_the_recipe_to_99_percent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import time

    from trainkit.cli.main import main

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    monkeypatch.setenv("TRAINKIT_DATA_DIR", DATA_DIR)
    config, root = "recipes/mnist/config.yaml", f"trainer.default_root_dir={tmp_path}"
    start = time.perf_counter()
    assert main(["fit", config, root]) == 0
    fit_seconds = time.perf_counter() - start
    # The README's first command ends by testing the best checkpoint (test_after_fit).
    fit_output = capsys.readouterr().out
    assert "trainkit: test_after_fit: testing the best checkpoint" in fit_output
    tested = fit_output[fit_output.index("{", fit_output.index("test_after_fit")) :]
    fit_accuracy = json.loads(tested)["test/acc"]
    with capsys.disabled():
        print(f"\nMNIST fit's test_after_fit: test/acc={fit_accuracy:.4f}")
    assert fit_accuracy >= 0.99
    # The run's own folder holds the best and last; <root>/checkpoints/last.ckpt links
    # to the newest run's last.ckpt.
    run = tmp_path / "logs" / "version_0" / "checkpoints"
    checkpoints = sorted(p.name for p in run.iterdir())
    assert "last.ckpt" in checkpoints and len(checkpoints) == 2  # the best and last
    assert (tmp_path / "checkpoints" / "last.ckpt").resolve() == (run / "last.ckpt").resolve()
    assert list((tmp_path / "logs" / "version_0").glob("events.out.tfevents.*"))
    capsys.readouterr()
    assert main(["test", config, root, f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}"]) == 0
    printed = capsys.readouterr().out
    accuracy = json.loads(printed[printed.index("{") :])["test/acc"]
    with capsys.disabled():
        print(f"\nMNIST via the CLI, 2 epochs: test/acc={accuracy:.4f}, fit {fit_seconds:.1f} s")
    assert accuracy >= 0.99


def test_the_speed_anchor_trains_the_recipe_s_network() -> None:
    """benchmarks/mnist_anchor.py must do the recipe's work: the same layers, same outputs."""
    from benchmarks.mnist_anchor import recipe_network
    from recipes.mnist.model import MNISTClassifier

    model, anchor = MNISTClassifier().eval(), recipe_network().eval()
    layers = [*model.features, *model.head]
    assert [type(layer) for layer in layers] == [type(layer) for layer in anchor]
    weights = [v for k, v in model.state_dict().items() if k.startswith(("features.", "head."))]
    anchor.load_state_dict(dict(zip(anchor.state_dict(), weights, strict=True)))
    images = torch.randn(4, 1, 28, 28)
    assert torch.equal(model(images), anchor(images))
