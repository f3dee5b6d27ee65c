"""The Fabric utilities Lightning projects import (lightning.fabric -> trainkit.lightning.fabric):
seeding, rank-zero helpers, types, scalars and filesystems; the Fabric class is refused."""

from __future__ import annotations

import importlib
import importlib.util
import os
import random
import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from tests.helpers import QUIET, Classifier, blobs
from trainkit.lightning.fabric.loggers import Logger as FabricLogger
from trainkit.lightning.fabric.utilities.apply_func import convert_tensors_to_scalars
from trainkit.lightning.fabric.utilities.cloud_io import (
    _atomic_save,
    _is_dir,
    _is_local_file_protocol,
    _is_object_storage,
    _load,
    get_filesystem,
)
from trainkit.lightning.fabric.utilities.seed import (
    pl_worker_init_function,
    reset_seed,
    seed_everything,
)

HAS_LIGHTNING = importlib.util.find_spec("lightning") is not None

# (module under lightning.fabric, name): each resolves under trainkit.lightning.fabric.
NAMES = [
    ("", "seed_everything"),
    ("utilities", "rank_zero_only"),
    ("utilities", "AttributeDict"),
    ("utilities", "move_data_to_device"),
    ("utilities", "suggested_max_num_workers"),
    ("utilities", "Throughput"),
    ("utilities.seed", "seed_everything"),
    ("utilities.seed", "reset_seed"),
    ("utilities.seed", "pl_worker_init_function"),
    ("utilities.rank_zero", "rank_zero_only"),
    ("utilities.rank_zero", "rank_zero_info"),
    ("utilities.rank_zero", "rank_zero_warn"),
    ("utilities.rank_zero", "rank_zero_debug"),
    ("utilities.rank_zero", "rank_zero_deprecation"),
    ("utilities.rank_zero", "rank_prefixed_message"),
    ("utilities.rank_zero", "_get_rank"),
    ("utilities.warnings", "PossibleUserWarning"),
    ("utilities.data", "AttributeDict"),
    ("utilities.types", "_PATH"),
    ("utilities.types", "_DEVICE"),
    ("utilities.types", "_MAP_LOCATION_TYPE"),
    ("utilities.apply_func", "move_data_to_device"),
    ("utilities.apply_func", "convert_tensors_to_scalars"),
    ("utilities.cloud_io", "get_filesystem"),
    ("utilities.cloud_io", "_load"),
    ("utilities.cloud_io", "_atomic_save"),
    ("utilities.cloud_io", "_is_dir"),
    ("utilities.cloud_io", "_is_local_file_protocol"),
    ("utilities.cloud_io", "_is_object_storage"),
    ("loggers", "Logger"),
    ("loggers.logger", "Logger"),
    ("loggers.logger", "rank_zero_experiment"),
    ("utilities.logger", "_add_prefix"),
    ("utilities.logger", "_convert_params"),
    ("utilities.logger", "_sanitize_callable_params"),
    ("utilities.logger", "_flatten_dict"),
    ("utilities.logger", "_sanitize_params"),
    ("utilities.logger", "_convert_json_serializable"),
    ("utilities.exceptions", "MisconfigurationException"),
    ("utilities.data", "has_iterable_dataset"),
    ("utilities.data", "sized_len"),
    ("utilities.data", "has_len"),
    ("utilities.data", "_update_dataloader"),
    ("plugins.environments", "LightningEnvironment"),
    ("plugins.environments", "SLURMEnvironment"),
    ("plugins.environments", "TorchElasticEnvironment"),
]


def _module(root: str, path: str) -> Any:
    return importlib.import_module(f"{root}.{path}" if path else root)


@pytest.mark.parametrize(("path", "name"), NAMES, ids=[f"{p}.{n}" for p, n in NAMES])
def test_the_names_resolve(path: str, name: str) -> None:
    assert getattr(_module("trainkit.lightning.fabric", path), name) is not None


@pytest.mark.skipif(not HAS_LIGHTNING, reason="needs Lightning")
@pytest.mark.parametrize(("path", "name"), NAMES, ids=[f"{p}.{n}" for p, n in NAMES])
def test_each_name_is_where_lightning_fabric_has_it(path: str, name: str) -> None:
    assert hasattr(_module("lightning.fabric", path), name)


def test_the_fabric_class_is_refused_saying_what_there_is() -> None:
    import trainkit.lightning.fabric as fabric

    with pytest.raises(AttributeError, match="does not provide Lightning's Fabric"):
        fabric.Fabric  # noqa: B018


@pytest.mark.parametrize(
    ("variables", "rank"),
    [
        ({}, None),
        ({"JSM_NAMESPACE_RANK": "9"}, 9),
        ({"JSM_NAMESPACE_RANK": "9", "SLURM_PROCID": "7"}, 7),
        ({"SLURM_PROCID": "7", "LOCAL_RANK": "5"}, 5),
        ({"SLURM_PROCID": "7", "LOCAL_RANK": "5", "RANK": "1"}, 1),
    ],
)
def test_get_rank_reads_lightnings_variables_in_its_order(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], rank: int | None
) -> None:
    from trainkit.lightning.fabric.utilities.rank_zero import _get_rank

    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"):
        monkeypatch.delenv(key, raising=False)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    assert _get_rank() == rank


def test_reset_seed_seeds_again_with_the_last_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("TRAINKIT_GLOBAL_SEED", "PL_GLOBAL_SEED"):
        monkeypatch.delenv(key, raising=False)
    torch.manual_seed(5)
    reset_seed()  # never seeded: nothing happens
    expected = torch.rand(1)
    torch.manual_seed(5)
    assert torch.equal(torch.rand(1), expected)
    seed_everything(11)
    first = (torch.rand(1), random.random())
    torch.rand(3)  # the streams move on
    reset_seed()
    assert (torch.rand(1), random.random()) == first


def test_the_seed_is_recorded_where_lightning_code_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Projects seed what they draw themselves from PL_GLOBAL_SEED (a dataset's own
    # sampling): without it, every seed would draw the same numbers.
    import trainkit.lightning as L
    from trainkit.lightning.utilities.seed import seed_everything as from_utilities

    for key in ("TRAINKIT_GLOBAL_SEED", "PL_GLOBAL_SEED", "PL_SEED_WORKERS"):
        monkeypatch.delenv(key, raising=False)
    assert L.seed_everything is seed_everything is from_utilities
    assert L.fabric.seed_everything is seed_everything
    seed_everything(4, workers=True)
    assert (os.environ["PL_GLOBAL_SEED"], os.environ["PL_SEED_WORKERS"]) == ("4", "1")
    seed_everything(5)
    assert (os.environ["PL_GLOBAL_SEED"], os.environ["PL_SEED_WORKERS"]) == ("5", "0")
    # A process given only Lightning's variable seeds from it, and resets to it.
    monkeypatch.delenv("TRAINKIT_GLOBAL_SEED")
    monkeypatch.setenv("PL_GLOBAL_SEED", "9")
    assert seed_everything() == 9
    expected = torch.rand(2)
    monkeypatch.delenv("TRAINKIT_GLOBAL_SEED")
    reset_seed()
    assert torch.equal(torch.rand(2), expected)
    monkeypatch.setenv("PL_GLOBAL_SEED", "nine")
    monkeypatch.delenv("TRAINKIT_GLOBAL_SEED")
    with pytest.raises(ValueError, match="PL_GLOBAL_SEED='nine' is not a seed"):
        seed_everything()


class Draws(Dataset[float]):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> float:
        return random.random()  # Python's generator: seeded per worker by the init function


def _worker_draws(rank: int) -> list[float]:
    seed_everything(3)
    loader = DataLoader(
        Draws(),
        batch_size=2,
        num_workers=2,
        worker_init_fn=lambda worker: pl_worker_init_function(worker, rank=rank),
        multiprocessing_context="fork",
    )
    return [float(value) for batch in loader for value in batch]


@pytest.mark.skipif(sys.platform != "linux", reason="forks DataLoader workers")
def test_pl_worker_init_function_gives_each_rank_and_worker_its_own_streams() -> None:
    rank0, again, rank1 = _worker_draws(0), _worker_draws(0), _worker_draws(1)
    assert rank0 == again  # reproducible
    assert rank0[:2] != rank0[2:]  # the two workers draw differently
    assert rank0 != rank1  # and so do the ranks


def test_convert_tensors_to_scalars_keeps_the_containers() -> None:
    converted = convert_tensors_to_scalars(
        {"loss": torch.tensor(0.25), "parts": [torch.tensor([2]), "text"], "n": 1}
    )
    assert converted == {"loss": 0.25, "parts": [2, "text"], "n": 1}
    assert isinstance(converted["loss"], float)
    with pytest.raises(ValueError, match=r"2 elements .*reduce it first"):
        convert_tensors_to_scalars({"x": torch.zeros(2)})


def test_get_filesystem_for_local_paths_and_urls(tmp_path: Path) -> None:
    local = get_filesystem(tmp_path)
    assert local.isdir(str(tmp_path)) and type(local).__name__ == "LocalFileSystem"
    memory = get_filesystem("memory://run/metrics.csv")
    with memory.open("memory://run/metrics.csv", "w") as file:
        file.write("step\n")
    assert memory.cat("memory://run/metrics.csv") == b"step\n"


def test_the_private_loading_helpers_projects_import(tmp_path: Path) -> None:
    # Projects load their checkpoints with Lightning's private _load (as pl_load).
    state = {"state_dict": {"w": torch.arange(3.0)}, "epoch": 2}
    _atomic_save(state, tmp_path / "a.ckpt")
    assert [p.name for p in tmp_path.iterdir()] == ["a.ckpt"]  # no temporary file left
    loaded = _load(tmp_path / "a.ckpt", map_location=lambda storage, location: storage)
    assert torch.equal(loaded["state_dict"]["w"], state["state_dict"]["w"])
    assert loaded["epoch"] == 2
    with open(tmp_path / "a.ckpt", "rb") as file:
        assert _load(file)["epoch"] == 2
    _atomic_save(state, "memory://run/b.ckpt")  # through fsspec
    assert _load("memory://run/b.ckpt", weights_only=True)["epoch"] == 2
    assert _is_local_file_protocol(tmp_path) and not _is_local_file_protocol("memory://run")
    memory = get_filesystem("memory://run")
    assert _is_dir(memory, "memory://run") and not _is_dir(memory, "memory://run/b.ckpt")
    assert not _is_object_storage(memory)

    class Bucket:  # an object store: any path that is not a file can be a folder
        protocol = ("s3", "s3a")

        def isfile(self, path: str) -> bool:
            return path.endswith(".ckpt")

        def isdir(self, path: str) -> bool:
            return False

    assert _is_object_storage(Bucket())
    assert _is_dir(Bucket(), "s3://b/new") and not _is_dir(Bucket(), "s3://b/new", strict=True)
    assert not _is_dir(Bucket(), "s3://b/a.ckpt")


def test_a_ported_script_using_fabric_utilities_runs(tmp_path: Path) -> None:
    # A project's script after the porting command of docs/porting.md.
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "import trainkit.lightning as pl\n"
        "from trainkit.lightning.fabric.utilities.seed import seed_everything\n"
        "from trainkit.lightning.fabric.utilities.rank_zero import rank_zero_info\n"
        "from trainkit.lightning.fabric.utilities.types import _PATH\n"
        "from trainkit.lightning.demos.boring_classes import BoringModel\n"
        "def run(root: _PATH) -> None:\n"
        "    seed_everything(7)\n"
        "    trainer = pl.Trainer(max_steps=2, default_root_dir=root, logger=False,\n"
        "                         enable_progress_bar=False, enable_model_summary=False)\n"
        "    trainer.fit(BoringModel())\n"
        "    rank_zero_info(f'steps {trainer.global_step}')\n"
        f"run({str(tmp_path)!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "steps 2" in done.stdout


class MetricsOnly(FabricLogger):
    """A logger library's implementation of the interface alone (as Fabric's loggers are)."""

    LOGGER_JOIN_CHAR = "/"

    def __init__(self, folder: str) -> None:
        self.folder, self.rows, self.closed = folder, [], False

    @property
    def name(self) -> str:
        return "impl"

    @property
    def version(self) -> str:
        return "v1"

    @property
    def root_dir(self) -> str:
        return self.folder

    @property
    def log_dir(self) -> str:
        return os.path.join(self.folder, "v1")

    def log_metrics(self, metrics: Any, step: int | None = None) -> None:
        self.rows.append((step, dict(metrics)))

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def finalize(self, status: str) -> None:
        self.closed = True


def test_a_logger_built_from_both_logger_classes_takes_the_implementations_methods(
    tmp_path: Path,
) -> None:
    # Logger libraries write class MyLogger(pl.loggers.Logger, MyFabricLogger): the
    # Trainer-facing class adds only save_dir and after_save_checkpoint.
    import trainkit.lightning as L

    class Both(L.loggers.Logger, MetricsOnly):
        pass

    logger = Both(str(tmp_path))
    assert (logger.name, logger.version, logger.LOGGER_JOIN_CHAR) == ("impl", "v1", "/")
    assert logger.log_dir == os.path.join(str(tmp_path), "v1")
    assert logger.root_dir == str(tmp_path) and logger.save_dir is None
    trainer = L.Trainer(max_epochs=1, log_every_n_steps=1, **{**QUIET, "logger": logger})
    trainer.fit(Classifier(), DataLoader(blobs(32), batch_size=16))
    assert logger.closed and [step for step, _ in logger.rows][:2] == [0, 1]


def test_the_logger_helpers_prepare_hyperparameters_as_logger_libraries_expect() -> None:
    from trainkit.lightning.fabric.utilities.logger import (
        _add_prefix,
        _convert_params,
        _flatten_dict,
        _sanitize_callable_params,
    )

    params = _sanitize_callable_params(
        _convert_params(Namespace(act=torch.nn.ReLU, size=lambda: 4, opt={"lr": 0.1}))
    )
    assert params == {"act": "ReLU", "size": 4, "opt": {"lr": 0.1}}
    assert _flatten_dict(params, ".") == {"act": "ReLU", "size": 4, "opt.lr": 0.1}
    assert _add_prefix({"loss": 1.0}, "train", "/") == {"train/loss": 1.0}


def test_scan_checkpoints_lists_what_a_logger_has_not_uploaded(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from trainkit.lightning.loggers.utilities import _scan_checkpoints

    paths = []
    for name in ("a.ckpt", "b.ckpt", "last.ckpt"):
        (tmp_path / name).write_bytes(b"x")
        paths.append(str(tmp_path / name))
        os.utime(paths[-1], (len(paths), len(paths)))  # a, b, last: oldest to newest
    saved = SimpleNamespace(
        last_model_path=paths[2],
        current_score=0.3,
        best_model_path=paths[0],
        best_model_score=0.1,
        best_k_models={paths[0]: 0.1, paths[1]: 0.2, str(tmp_path / "gone.ckpt"): 0.5},
    )
    found = _scan_checkpoints(saved, {})
    assert [(path, score, tag) for _, path, score, tag in found] == [
        (paths[0], 0.1, "best_k"),  # best_k_models is read after the best: its tag stays
        (paths[1], 0.2, "best_k"),
        (paths[2], 0.3, "latest"),
    ]
    uploaded = {path: mtime for mtime, path, _, _ in found[:2]}
    assert [path for _, path, _, _ in _scan_checkpoints(saved, uploaded)] == [paths[2]]


def test_misconfiguration_is_one_class_under_both_paths() -> None:
    # Code raises it from one path and catches it from the other, as with Lightning's.
    from trainkit.lightning.fabric.utilities.exceptions import MisconfigurationException
    from trainkit.lightning.utilities import exceptions

    assert MisconfigurationException is exceptions.MisconfigurationException


def test_the_loader_helpers_answer_and_warn_as_lightnings() -> None:
    from torch.utils.data import IterableDataset, RandomSampler, SequentialSampler

    from trainkit.lightning.fabric.utilities.data import (
        _update_dataloader,
        has_iterable_dataset,
        has_len,
        sized_len,
    )

    class Stream(IterableDataset[int]):
        def __iter__(self) -> Any:
            return iter(range(6))

        def __len__(self) -> int:
            return 6

    streamed = DataLoader(Stream(), batch_size=2)
    assert has_iterable_dataset(streamed) and sized_len(streamed) == 3
    with pytest.warns(UserWarning, match="Your `IterableDataset` has `__len__` defined"):
        assert has_len(streamed)
    with pytest.warns(UserWarning, match="returned 0 length"):
        assert has_len(DataLoader(list[int]()))
    plain = DataLoader(list(range(8)), batch_size=4, drop_last=True)
    assert not has_iterable_dataset(plain) and isinstance(plain.sampler, SequentialSampler)
    rebuilt = _update_dataloader(plain, RandomSampler(plain.dataset))  # type: ignore[arg-type]
    assert isinstance(rebuilt.sampler, RandomSampler)
    assert (rebuilt.batch_size, rebuilt.drop_last, len(rebuilt)) == (4, True, 2)


def test_the_cluster_environments_are_the_trainers_under_either_path() -> None:
    from trainkit.lightning.fabric.plugins import environments as fabric_environments
    from trainkit.lightning.plugins import environments

    for name in ("LightningEnvironment", "SLURMEnvironment", "TorchElasticEnvironment"):
        assert getattr(fabric_environments, name) is getattr(environments, name)
