"""Every code block in README.md and docs/ is executed or checked by a test.

- ``python`` blocks run, each file's blocks in order as one program;
- ``yaml`` blocks that are run configs load through the config checker (keys,
  types, class paths and init_args);
- ``bash`` blocks: every ``trainkit`` command line runs (``--help`` as is, the
  others with ``--print-config``, which checks the config and its overrides
  without training). Installation (``pip``), ``tensorboard`` and shell-script
  lines are not run here; the README's two set-up commands are checked by hand
  in a fresh virtual environment before each release.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from trainkit.cli.engine import TrainkitCLI
from trainkit.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks(page: Path, language: str) -> list[str]:
    return _blocks_of(page.read_text(), language)


def _blocks_of(text: str, language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(text) if lang == language]


def test_pages_with_code_are_found() -> None:
    assert any(_blocks(page, "python") for page in PAGES)
    assert any(_blocks(page, "bash") for page in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _blocks(page, "python")
    if not blocks:
        pytest.skip(f"{page.name} has no Python blocks")
    monkeypatch.chdir(tmp_path)  # runs write logs under the working directory
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    missing: list[str] = []
    for index, block in enumerate(blocks):
        try:
            exec(compile(block, f"{page.name}[python block {index}]", "exec"), namespace)
        except ModuleNotFoundError as error:
            # A block for an optional extra (rich, MLflow, W&B) where it is not installed;
            # every other block still runs.
            if not any(extra in str(error) for extra in OPTIONAL):
                raise
            missing.append(f"block {index} ({error})")
    if missing:
        pytest.skip(f"{page.name}: optional packages absent, not run: {'; '.join(missing)}")


#: Packages behind trainkit's extras, and the install hint trainkit's own errors give
#: for one ("pip install 'trainkit[rich]'"): a docs block needing one is skipped without it.
OPTIONAL = ("'mlflow'", "'wandb'", "'rich'", "'psutil'", "'trainkit[")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_yaml_configs_are_valid(page: Path, tmp_path: Path) -> None:
    configs = [b for b in _blocks(page, "yaml") if re.search(r"^model:", b, re.MULTILINE)]
    if not configs:
        pytest.skip(f"{page.name} has no run configs")
    for index, block in enumerate(configs):
        path = tmp_path / f"block{index}.yaml"
        path.write_text(block)
        # The engine checks every key, type, class_path and init_args as `trainkit fit` does.
        run = TrainkitCLI("fit", [str(path)], []).run_config
        assert run["model"]["class_path"], page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_trainkit_commands_in_bash_blocks_check(
    page: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = []
    for block in _blocks(page, "bash"):
        for line in block.replace("\\\n", " ").splitlines():  # join continued lines
            line = line.split(" #", 1)[0].strip()
            for part in line.split("&&"):
                words = shlex.split(part.strip())
                if words[:1] == ["trainkit"] or words[:3] == ["python", "-m", "trainkit"]:
                    commands.append(words[words.index("trainkit") + 1 :])
    if not commands:
        pytest.skip(f"{page.name} has no trainkit commands")
    monkeypatch.chdir(ROOT)  # configs are given relative to the repository
    for arguments in commands:
        if "--help" in arguments:
            with pytest.raises(SystemExit) as info:
                main(arguments)
            assert info.value.code == 0, arguments
        else:
            assert main([*arguments, "--print-config"]) == 0, (arguments, capsys.readouterr().err)


# What porting.md's import rewrite must do (left: a Lightning project's line; right:
# the line after the command), including names that only contain a package's name.
PORTED_LINES = {
    "import lightning.pytorch as pl": "import trainkit.lightning as pl",
    "from lightning import LightningModule, Trainer": (
        "from trainkit.lightning import LightningModule, Trainer"
    ),
    "import lightning as L": "import trainkit.lightning as L",
    "from lightning import pytorch as pl": "from trainkit.lightning import pytorch as pl",
    "import lightning": "import trainkit.lightning, trainkit.lightning as lightning",
    "    import lightning  # for its version": (
        "    import trainkit.lightning, trainkit.lightning as lightning  # for its version"
    ),
    # A doctest's import too.
    ">>> import lightning": ">>> import trainkit.lightning, trainkit.lightning as lightning",
    "import lightning_utilities": "import lightning_utilities",
    "import pytorch_lightning": "import trainkit.lightning",
    "from pytorch_lightning.callbacks import ModelCheckpoint": (
        "from trainkit.lightning.callbacks import ModelCheckpoint"
    ),
    "trainer = pytorch_lightning.Trainer()": "trainer = trainkit.lightning.Trainer()",
    "from lightning_fabric.utilities.seed import seed_everything": (
        "from trainkit.lightning.fabric.utilities.seed import seed_everything"
    ),
    "from lightning.fabric.utilities import rank_zero_only": (
        "from trainkit.lightning.fabric.utilities import rank_zero_only"
    ),
    'level = logging.getLogger("pytorch_lightning").level': (
        'level = logging.getLogger("trainkit.lightning").level'
    ),
    "log_level_pytorch_lightning = 10": "log_level_pytorch_lightning = 10",
    "lightning_fabric_version = None": "lightning_fabric_version = None",
    # Another package's module named after Lightning stays (it is not Lightning's).
    "from ray.tune.integration.pytorch_lightning import TuneReportCallback": (
        "from ray.tune.integration.pytorch_lightning import TuneReportCallback"
    ),
    "import other.lightning_fabric": "import other.lightning_fabric",
    "  class_path: lightning.pytorch.callbacks.EarlyStopping": (
        "  class_path: trainkit.lightning.callbacks.EarlyStopping"
    ),
    # Classes reached through the top-level package (Hydra configs, mock.patch strings).
    "  _target_: lightning.Trainer": "  _target_: trainkit.lightning.Trainer",
    'patch("lightning.LightningModule.log")': 'patch("trainkit.lightning.LightningModule.log")',
    "lightning.seed_everything(0)": "trainkit.lightning.seed_everything(0)",
    'config_name = "lightning.yaml"': 'config_name = "lightning.yaml"',
}


@pytest.mark.skipif(shutil.which("sed") is None, reason="needs sed")
def test_the_porting_command_rewrites_imports_and_leaves_other_names(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "porting.md").read_text()
    command = next(block for block in _blocks_of(page, "bash") if "xargs sed" in block)
    for folder in ("src", "tests", "configs"):
        (tmp_path / folder).mkdir()
    project = tmp_path / "src" / "project.py"
    project.write_text("\n".join(PORTED_LINES) + "\n")
    for _ in range(2):  # the command can run twice
        subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True)
        assert project.read_text().splitlines() == list(PORTED_LINES.values())
