"""trainkit's command line: overrides of list entries, LightningCLI's flags, defaults, testing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import printed_config
from trainkit.checkpoint.files import load
from trainkit.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "tests" / "configs" / "blobs.yaml")


# Class paths such as tests.helpers import from the repository root.
pytestmark = pytest.mark.usefixtures("at_repo_root")


def _with_callbacks(tmp_path: Path, *entries: str) -> str:
    """blobs.yaml with these callback entries (YAML flow mappings) instead of its own."""
    path = tmp_path / "callbacks.yaml"
    path.write_text(f"trainer:\n  callbacks: [{', '.join(entries)}]\n")
    return f"--config={CONFIG} --config={path}"


def _two_callbacks(tmp_path: Path) -> list[str]:
    return _with_callbacks(
        tmp_path,
        "{class_path: trainkit.callbacks.ModelCheckpoint, init_args: {monitor: val/acc}}",
        "{class_path: trainkit.callbacks.EarlyStopping, init_args: {monitor: val/loss}}",
    ).split()


def test_a_list_entry_is_reached_by_index_and_by_class_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _two_callbacks(tmp_path)
    forms = [
        ("trainer.callbacks.0.init_args.monitor=val/other", 0, "monitor", "val/other"),
        ("trainer.callbacks.1.init_args.patience=7", 1, "patience", 7),
        ("trainer.callbacks.-1.init_args.patience=8", 1, "patience", 8),  # from the end
        ("trainer.callbacks.ModelCheckpoint.init_args.mode=max", 0, "mode", "max"),
        ("trainer.callbacks.EarlyStopping.patience=9", 1, "patience", 9),  # short form
        ("trainer.callbacks.ModelCheckpoint.save_top_k=3", 0, "save_top_k", 3),
    ]
    for override, index, key, value in forms:
        callbacks = printed_config(capsys, "fit", *config, override)["trainer"]["callbacks"]
        assert callbacks[index]["init_args"][key] == value, override
        other = callbacks[1 - index]["init_args"]
        assert other.get(key) != value  # only the named entry changed
    # The next index adds an entry; a whole entry can be replaced.
    added = "trainer.callbacks.2={class_path: trainkit.callbacks.LearningRateMonitor}"
    callbacks = printed_config(capsys, "fit", *config, added)["trainer"]["callbacks"]
    assert [c["class_path"].rpartition(".")[2] for c in callbacks] == [
        "ModelCheckpoint",
        "EarlyStopping",
        "LearningRateMonitor",
    ]


def test_two_entries_of_one_class_must_be_named_by_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = "{class_path: trainkit.callbacks.ModelCheckpoint}"
    config = _with_callbacks(tmp_path, entry, entry).split()
    assert main(["fit", *config, "trainer.callbacks.ModelCheckpoint.monitor=x"]) == 2
    error = capsys.readouterr().err
    assert "2 entries of 'trainer.callbacks' are ModelCheckpoint (indices 0, 1)" in error
    assert "trainer.callbacks.0" in error


def test_model_and_data_take_the_short_form_too(capsys: pytest.CaptureFixture[str]) -> None:
    run = printed_config(capsys, "fit", CONFIG, "model.lr=0.3", "data.batch_size=8")
    assert run["model"]["init_args"]["lr"] == 0.3
    assert run["data"]["init_args"]["batch_size"] == 8


def test_lightning_cli_flag_forms_mean_the_same_overrides(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = printed_config(
        capsys, "fit", CONFIG, "trainer.max_epochs=3", "model.init_args.lr=0.25", "ckpt_path=x.ckpt"
    )
    flags = printed_config(
        capsys,
        "fit",
        "--config",
        CONFIG,
        "--trainer.max_epochs=3",
        "--model.init_args.lr",
        "0.25",
        "--ckpt_path=x.ckpt",
    )
    assert flags == plain and plain["ckpt_path"] == "x.ckpt"  # not read by --print-config
    assert (plain["trainer"]["max_epochs"], plain["model"]["init_args"]["lr"]) == (3, 0.25)
    # LightningCLI's underscore spelling of --print-config; --config=FILE; negative values.
    assert main(["fit", f"--config={CONFIG}", "--trainer.max_epochs", "-1", "--print_config"]) == 0
    assert "max_epochs: -1" in capsys.readouterr().out


def test_several_config_files_merge_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text("trainer: {max_epochs: 5}\nmodel: {init_args: {lr: 0.2}}\n")
    run = printed_config(
        capsys, "fit", "--config", CONFIG, "--config", str(extra), "model.init_args.lr=0.3"
    )
    assert run["trainer"]["max_epochs"] == 5  # from the second file
    assert run["trainer"]["enable_progress_bar"] is False  # kept from the first
    assert run["model"]["init_args"]["lr"] == 0.3  # the override comes last
    assert run["model"]["class_path"] == "tests.helpers.Classifier"
    # An override between the files still comes after both.
    run = printed_config(capsys, "fit", "--config", CONFIG, "model.lr=0.3", "--config", str(extra))
    assert run["model"]["init_args"]["lr"] == 0.3


def test_print_config_shows_every_default_of_the_model_data_and_callbacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = printed_config(capsys, "fit", CONFIG)
    # tests.helpers.Classifier(features=8, classes=3, lr=0.1); the config sets lr only.
    assert run["model"]["init_args"] == {"features": 8, "classes": 3, "lr": 0.1}
    assert run["data"]["init_args"] == {"batch_size": 32}
    checkpoint = run["trainer"]["callbacks"][0]["init_args"]
    assert checkpoint["monitor"] == "val/acc" and checkpoint["save_top_k"] == 1
    assert checkpoint["every_n_epochs"] is None  # a default the config did not write
    assert run["trainer"]["log_every_n_steps"] == 50
    assert run["test_after_fit"] is False


def test_the_saved_config_repeats_the_run_with_its_defaults(tmp_path: Path) -> None:
    assert (
        main(["fit", CONFIG, f"trainer.default_root_dir={tmp_path}", "trainer.max_epochs=1"]) == 0
    )
    saved = yaml.safe_load((tmp_path / "logs" / "version_0" / "config.yaml").read_text())
    assert saved["model"]["init_args"] == {"features": 8, "classes": 3, "lr": 0.1}
    checkpoint = load(tmp_path / "checkpoints" / "last.ckpt")
    assert checkpoint["config"]["model"]["init_args"]["features"] == 8


def test_test_after_fit_tests_the_best_checkpoint_and_prints_the_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = f"trainer.default_root_dir={tmp_path}"
    assert main(["fit", CONFIG, root, "test_after_fit=true"]) == 0
    out = capsys.readouterr().out
    best = next((tmp_path / "logs" / "version_0" / "checkpoints").glob("epoch=*.ckpt"))
    assert f"trainkit: test_after_fit: testing the best checkpoint {best} (val/acc=" in out
    metrics = json.loads(out[out.index("{", out.index("test_after_fit")) :])
    assert metrics["test/acc"] > 0.5
    # The same numbers as testing that checkpoint afterwards.
    assert main(["test", CONFIG, root, f"ckpt_path={best}"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed[printed.index("{") :]) == metrics


def test_test_after_fit_without_a_monitor_tests_the_final_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = f"trainer.default_root_dir={tmp_path}"
    assert main(["fit", CONFIG, root, "trainer.callbacks=[]", "--test_after_fit=true"]) == 0
    out = capsys.readouterr().out
    assert "testing the final weights (no ModelCheckpoint monitors a metric)" in out
    assert json.loads(out[out.index("{", out.index("test_after_fit")) :])["test/acc"] > 0.5


def test_test_after_fit_needs_test_data_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "no_test_data.py").write_text(
        "from tests.helpers import BlobData\n\n"
        "class TrainOnly(BlobData):\n"
        "    test_dataloader = None\n"
    )
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        argv = ["fit", CONFIG, "data.class_path=no_test_data.TrainOnly", "test_after_fit=true"]
        assert main([*argv, f"trainer.default_root_dir={tmp_path / 'root'}"]) == 2
    finally:
        sys.path.remove(str(tmp_path))
    error = capsys.readouterr().err
    assert "defines test_dataloader(), which test_after_fit needs" in error
    assert not (tmp_path / "root").exists()


def _strategy(init_method: str, rank: int, world_size: int = 2) -> list[str]:
    return [
        "trainer.strategy.class_path=trainkit.strategies.ddp.DDPStrategy",
        f"trainer.strategy.init_args.init_method={init_method}",
        f"trainer.strategy.init_args.rank={rank}",
        f"trainer.strategy.init_args.world_size={world_size}",
    ]


def test_a_strategy_with_arguments_is_a_class_path_entry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    printed = printed_config(capsys, "fit", CONFIG, *_strategy("tcp://127.0.0.1:29555", 1))
    assert printed["trainer"]["strategy"]["class_path"] == "trainkit.strategies.ddp.DDPStrategy"
    assert printed["trainer"]["strategy"]["init_args"]["init_method"] == "tcp://127.0.0.1:29555"
    misspelt = [_strategy("env://", 0)[0], "trainer.strategy.init_args.init_metod=env://"]
    assert main(["fit", CONFIG, *misspelt, "--print-config"]) == 2
    assert "Did you mean 'init_method'" in capsys.readouterr().err
    assert main(["fit", CONFIG, *_strategy("udp://host:1", 0), "--print-config"]) == 0  # not built
    capsys.readouterr()
    root = "trainer.default_root_dir=unused"
    assert main(["fit", CONFIG, root, *_strategy("udp://host:1", 0)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("trainkit: error: trainer.strategy (DDPStrategy): init_method=")
    assert error.count("\n") == 1


def test_two_processes_started_by_hand_from_the_config_meet_over_tcp(tmp_path: Path) -> None:
    from tests.distributed.spawn import free_port, run_by_hand

    init_method = f"tcp://127.0.0.1:{free_port()}"
    command = ["-m", "trainkit", "fit", CONFIG, f"trainer.default_root_dir={tmp_path}"]
    run_by_hand([[*command, *_strategy(init_method, rank)] for rank in range(2)])
    checkpoint = load(tmp_path / "checkpoints" / "last.ckpt")
    # 512 samples, 32 per process and step, 2 processes: 8 steps an epoch, 2 epochs.
    assert checkpoint["loop"]["global_step"] == 16
