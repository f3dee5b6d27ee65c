"""rank_zero_only and friends act on global rank 0 and nowhere else."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import trainkit
from tests.helpers import repo_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("variable", "rank"), [("RANK", "1"), ("SLURM_PROCID", "3")])
def test_other_ranks_do_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variable: str, rank: str
) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv(variable, rank)
    assert trainkit.rank_zero_only(lambda: "ran")() is None
    assert trainkit.rank_zero_only(lambda: "ran", default="skipped")() == "skipped"
    trainkit.rank_zero_print("hello")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainkit.rank_zero_warn("careful")
    assert capsys.readouterr().out == "" and caught == []


def test_rank_zero_does_everything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RANK", "0")
    assert trainkit.rank_zero_only(lambda: "ran")() == "ran"
    assert trainkit.rank_zero_only(lambda: "ran", default="skipped")() == "ran"
    trainkit.rank_zero_print("hello")
    with pytest.warns(UserWarning, match="careful"):
        trainkit.rank_zero_warn("careful")
    assert capsys.readouterr().out == "hello\n"


def test_rank_zero_deprecation_warns_from_the_callers_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainkit.utilities.rank_zero import rank_zero_deprecation

    monkeypatch.setenv("RANK", "0")
    with pytest.warns(DeprecationWarning, match="renamed") as caught:
        rank_zero_deprecation("renamed")
    assert caught[0].filename == __file__
    monkeypatch.setenv("RANK", "1")
    with warnings.catch_warnings(record=True) as other:
        warnings.simplefilter("always")
        rank_zero_deprecation("renamed")
    assert other == []


# lightning_utilities' rank_zero_only (torchmetrics and Lightning projects log
# through it) must have its rank set, as Lightning sets it, or it raises. It comes
# with torchmetrics (trainkit's dev extra); trainkit itself does not need it.
needs_lightning_utilities = pytest.mark.skipif(
    importlib.util.find_spec("lightning_utilities") is None,
    reason="lightning_utilities is not installed",
)


def _ranks_in_a_new_process(code: str, **environment: str) -> list[str]:
    """Run ``code`` (which prints) in a fresh interpreter with the launcher variables given."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "SLURM_PROCID", "LOCAL_RANK")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, **environment, "PYTHONPATH": repo_env()["PYTHONPATH"]},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.split()


_AFTER_IMPORT = (
    "import {module}\n"
    "from lightning_utilities.core.rank_zero import rank_zero_only, rank_zero_info\n"
    "rank_zero_info('logged')\n"  # raises while the rank is unset
    "import trainkit\n"
    "print(rank_zero_only.rank, trainkit.rank_zero_only.rank)\n"
)


@needs_lightning_utilities
@pytest.mark.parametrize("module", ["trainkit", "trainkit.lightning"])
@pytest.mark.parametrize(
    ("environment", "rank"),
    [({}, "0"), ({"RANK": "1"}, "1"), ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4"}, "3")],
)
def test_importing_trainkit_sets_lightning_utilities_rank_from_the_launcher(
    module: str, environment: dict[str, str], rank: str
) -> None:
    code = _AFTER_IMPORT.format(module=module)
    assert _ranks_in_a_new_process(code, **environment) == [rank, rank]


@needs_lightning_utilities
def test_a_rank_another_library_set_is_kept_unless_a_launcher_says_otherwise() -> None:
    # torchmetrics, imported first, sets it from LOCAL_RANK; a launcher's global
    # rank wins over that guess, and without one the library's value is kept.
    code = (
        "from lightning_utilities.core.rank_zero import rank_zero_only\n"
        "rank_zero_only.rank = 5\n" + _AFTER_IMPORT.format(module="trainkit")
    )
    assert _ranks_in_a_new_process(code) == ["5", "0"]
    assert _ranks_in_a_new_process(code, RANK="2") == ["2", "2"]


@needs_lightning_utilities
def test_trainkit_and_lightning_utilities_agree_on_the_rank() -> None:
    from lightning_utilities.core.rank_zero import rank_zero_only as theirs

    trainkit.rank_zero_only.rank = 3
    assert theirs.rank == 3
    assert trainkit.rank_zero_only(lambda: "ran")() is None
    trainkit.rank_zero_only.rank = None  # back to the environment, for both
    assert theirs.rank == trainkit.rank_zero_only.rank == 0


@needs_lightning_utilities
def test_a_trainer_sets_the_global_rank_when_it_sets_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from lightning_utilities.core.rank_zero import rank_zero_only as theirs

    from tests.helpers import QUIET, Classifier, blobs, loader

    monkeypatch.setattr(theirs, "rank", 7)  # a wrong guess made before the run
    seen: list[int] = []

    class Record(trainkit.Callback):
        def on_train_start(self, trainer: trainkit.Trainer, module: trainkit.Module) -> None:
            seen.append(theirs.rank)

    trainer = trainkit.Trainer(max_steps=1, callbacks=[Record()], **QUIET)
    trainer.fit(Classifier(), loader(blobs(32)))
    assert seen == [0] and trainkit.rank_zero_only.rank == 0


def test_trainkit_imports_where_lightning_utilities_is_blocked() -> None:
    code = (
        "import sys\nsys.modules['lightning_utilities'] = None\n"
        "import trainkit.lightning\nprint(trainkit.rank_zero_only.rank)\n"
    )
    assert _ranks_in_a_new_process(code, RANK="1") == ["1"]
