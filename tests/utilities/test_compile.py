"""Trainer(compile=...): torch.compile on the module's forward (trainkit/compile.py)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import trainkit
from tests.helpers import QUIET, ROOT, Classifier, blobs, loader, repo_env
from trainkit.utilities.compile import CompileError, compile_forward

EAGER = {"backend": "eager"}


@pytest.fixture(autouse=True)
def _fresh_compile_caches() -> None:
    # torch keeps compiled code per code object across runs: each test starts without any.
    torch._dynamo.reset()


class CountingClassifier(Classifier):
    """Counts the forward calls that went through torch.compile's code."""

    compiled_calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            type(self).compiled_calls += 1
        return self.net(x)  # type: ignore[no-any-return]


def _fit(tmp_path: Path, compile: Any, steps: int = 12, ckpt: str | None = None) -> Any:
    torch.manual_seed(0)
    model = Classifier(lr=0.2)
    trainer = trainkit.Trainer(
        max_steps=steps,
        compile=compile,
        seed=3,
        **{**QUIET, "enable_checkpointing": True},
        default_root_dir=str(tmp_path),
        limit_val_batches=2,
    )
    trainer.fit(
        model, loader(blobs(256), 32, shuffle=True), loader(blobs(64, seed=1)), ckpt_path=ckpt
    )
    return trainer, model


def test_a_compiled_run_trains_and_its_checkpoint_loads_uncompiled(tmp_path: Path) -> None:
    torch.manual_seed(0)
    initial = {k: v.clone() for k, v in Classifier(lr=0.2).state_dict().items()}
    trainer, model = _fit(tmp_path, {"backend": "inductor"})
    assert trainer.callback_metrics["train/loss"] < 0.9  # it learned (ln 3 ~ 1.1 at start)
    assert any(not torch.equal(v, model.state_dict()[k]) for k, v in initial.items())
    # The keys are the uncompiled names (no _orig_mod. prefix) ...
    ckpt = trainer.checkpoint_callback.last_model_path
    state = torch.load(ckpt, weights_only=True)["state_dict"]
    assert set(state) == set(initial)
    # ... so the file loads into a plain, uncompiled module with equal weights.
    plain = Classifier.load_from_checkpoint(ckpt)
    assert plain._compiled_call_impl is None
    for key, value in model.state_dict().items():
        torch.testing.assert_close(plain.state_dict()[key], value, rtol=0, atol=0)
    # After the run the module is called as it was before: uncompiled.
    assert model._compiled_call_impl is None


def test_an_uncompiled_checkpoint_resumes_under_compile_without_a_warning(tmp_path: Path) -> None:
    first, _ = _fit(tmp_path / "first", False, steps=6)
    last = first.checkpoint_callback.last_model_path
    _, uncompiled = _fit(tmp_path / "uncompiled", False, steps=12, ckpt=last)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, compiled = _fit(tmp_path / "compiled", EAGER, steps=12, ckpt=last)
    # compile does not change what the run computes: resuming with it toggled is not a mismatch.
    assert not [w for w in caught if "saved with other settings" in str(w.message)]
    # The compiled resume continues exactly as the uncompiled one does.
    for key, value in uncompiled.state_dict().items():
        torch.testing.assert_close(compiled.state_dict()[key], value, rtol=1e-5, atol=1e-6)


def test_training_validation_and_prediction_go_through_the_compiled_forward() -> None:
    # A backend that runs each captured graph as it is and notes every run (whether
    # autograd was on): what executes, not what was traced, which depends on torch's
    # version (whether prediction's inference mode retraces, say).
    runs: list[bool] = []

    def noting_backend(graph: torch.fx.GraphModule, example_inputs: Any) -> Any:
        def run(*args: Any) -> Any:
            runs.append(torch.is_grad_enabled())
            return graph(*args)

        return run

    trainer = trainkit.Trainer(
        max_steps=2, compile={"backend": noting_backend}, limit_val_batches=1, **QUIET
    )
    model = Classifier()
    trainer.fit(model, loader(blobs(64), 32), loader(blobs(32)))
    assert runs.count(True) == 2  # the two training steps
    assert runs.count(False) >= 2  # the sanity check's batch and the validation batch
    fitted = len(runs)
    predictions = trainer.predict(model, loader(blobs(32)))
    assert predictions is not None and len(runs) == fitted + 1  # one prediction batch


def _noting_backend(runs: list[bool]) -> Any:
    # Runs each captured graph as it is, noting every run (whether autograd was on).
    def backend(graph: torch.fx.GraphModule, example_inputs: Any) -> Any:
        def run(*args: Any) -> Any:
            runs.append(torch.is_grad_enabled())
            return graph(*args)

        return run

    return backend


def test_what_torch_compile_returned_trains_as_the_module_inside_it(tmp_path: Path) -> None:
    # Lightning's way: trainer.fit(torch.compile(model)).
    runs: list[bool] = []
    torch.manual_seed(0)
    model = Classifier()
    torch.manual_seed(0)
    reference = Classifier()
    compiled = torch.compile(model, backend=_noting_backend(runs))
    options = {**QUIET, "enable_checkpointing": True, "limit_val_batches": 1}
    trainer = trainkit.Trainer(max_steps=3, default_root_dir=str(tmp_path), **options)
    trainer.fit(compiled, loader(blobs(96), 32), loader(blobs(32)))
    trainkit.Trainer(max_steps=3, **QUIET, limit_val_batches=1).fit(
        reference, loader(blobs(96), 32), loader(blobs(32))
    )
    assert runs.count(True) == 3  # each training step went through the compiled forward
    assert runs.count(False) >= 2  # the sanity check and the validation at the epoch's end
    assert trainer.lightning_module is model
    for key, value in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value, rtol=0, atol=0)
    # The checkpoint holds the module's own names (no torch "_orig_mod." prefix).
    state = torch.load(trainer.checkpoint_callback.last_model_path, weights_only=True)
    assert set(state["state_dict"]) == set(reference.state_dict())
    # The module is called uncompiled after the run (the wrapper still compiles).
    assert model._compiled_call_impl is None
    # Evaluating the module the last fit trained (model=None) compiles it as fit did.
    fitted = len(runs)
    trainer.validate(dataloaders=loader(blobs(32)))
    assert len(runs) == fitted + 1
    # ... and so does evaluating the wrapper, under another Trainer.
    trainkit.Trainer(**QUIET).predict(compiled, loader(blobs(32)))
    assert len(runs) == fitted + 2


def test_compiling_twice_is_refused_with_both_ways_out() -> None:
    compiled = torch.compile(Classifier(), backend="eager")
    trainer = trainkit.Trainer(max_steps=1, compile=EAGER, **QUIET)
    with pytest.raises(ValueError, match="already compiled") as error:
        trainer.fit(compiled, loader(blobs(32)))
    assert "Pass the module itself" in str(error.value)
    assert "without compile" in str(error.value)


def test_a_failure_of_the_users_own_compile_call_says_how_to_change_that_call() -> None:
    def failing_backend(graph: Any, inputs: Any) -> Any:
        raise RuntimeError("backend exploded\nmore lines")

    model = Classifier()
    trainer = trainkit.Trainer(max_steps=1, **QUIET)
    with pytest.raises(CompileError) as error:
        trainer.fit(torch.compile(model, backend=failing_backend), loader(blobs(32)))
    message = str(error.value)
    assert "failed compiling Classifier.forward as torch.compile(module) was asked" in message
    assert "the module itself instead of torch.compile(module)" in message
    assert "torch.compile(module, backend='aot_eager')" in message and "\n" not in message
    assert model._compiled_call_impl is None


def test_a_changing_batch_size_is_warned_about_once(tmp_path: Path) -> None:
    # Batches of 8, 5, 3, 7, 2 and 6 samples: each new shape recompiles a static forward.
    data = blobs(31)
    sizes = [8, 5, 3, 7, 2, 6]
    batches, start = [], 0
    for size in sizes:
        batches.append(list(range(start, start + size)))
        start += size
    ragged = DataLoader(data, batch_sampler=batches)
    trainer = trainkit.Trainer(
        max_epochs=2, compile={"backend": "eager", "dynamic": False}, **QUIET
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(Classifier(), ragged)
    recompiles = [str(w.message) for w in caught if "recompiled" in str(w.message)]
    assert len(recompiles) == 1, recompiles
    assert "drop_last=True" in recompiles[0] and "'dynamic': True" in recompiles[0]
    assert "size mismatch" in recompiles[0]


def test_one_batch_shape_gives_no_warning() -> None:
    trainer = trainkit.Trainer(max_steps=4, compile=EAGER, limit_val_batches=1, **QUIET)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(Classifier(), loader(blobs(64), 16), loader(blobs(32), 16))
    assert not [w for w in caught if "recompiled" in str(w.message)]


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"backnd": "eager"}, "'backnd' is not a torch.compile keyword argument. Did you mean"),
        ({"backend": "no_such_backend"}, "refused by torch.compile"),
        ({"mode": "fastest"}, "Unrecognized mode"),
        ("yes", "compile must be True, False or a dict"),
    ],
)
def test_bad_options_are_refused_before_the_run(setting: Any, expected: str) -> None:
    with pytest.raises((ValueError, TypeError), match="compile") as error:
        trainkit.Trainer(compile=setting, **QUIET)
    assert expected in str(error.value)
    if isinstance(setting, dict) and "backnd" in setting:
        assert "Valid keys: fullgraph, dynamic, backend, mode" in str(error.value)


def test_a_compiler_failure_is_one_clear_error() -> None:
    def failing_backend(graph: Any, inputs: Any) -> Any:
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore lines")

    model = Classifier()
    undo = compile_forward(model, {"backend": failing_backend}, print)
    with pytest.raises(CompileError) as error:
        model(torch.randn(4, 8))
    undo()
    message = str(error.value)
    assert "torch.compile failed compiling Classifier.forward" in message
    assert "RuntimeError: InvalidCxxCompiler: No working C++ compiler found (" in message
    assert "install a C++ compiler" in message and "compile=False" in message
    assert "\n" not in message
    assert isinstance(
        error.value, trainkit.utilities.messages.UsageError
    )  # the CLI prints it as one line
    assert model._compiled_call_impl is None


def test_the_cli_takes_trainer_compile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainkit.cli.engine import TrainkitCLI
    from trainkit.cli.main import main

    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # tests.helpers imports from here
    config = tmp_path / "run.yaml"
    config.write_text(
        "model: {class_path: tests.helpers.Classifier}\n"
        "data: {class_path: tests.helpers.BlobData}\n"
        "trainer: {max_steps: 1}\n"
    )
    path = str(config)
    run = TrainkitCLI("fit", [path], ["trainer.compile={backend: eager, dynamic: false}"])
    assert run.run_config["trainer"]["compile"] == {"backend": "eager", "dynamic": False}
    run = TrainkitCLI("fit", [path], ["trainer.compile=true"])
    assert run.run_config["trainer"]["compile"] is True
    # A key torch.compile does not take is refused before anything is built, in one line.
    assert main(["fit", path, "trainer.compile={backnd: eager}", "--print-config"]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    lines = printed.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainkit: error: ")
    assert re.search(r"trainer\.compile=.*Did you mean 'backend'", lines[0]), lines[0]


def test_toggling_compile_never_blocks_a_resume_of_the_cli() -> None:
    from trainkit.checkpoint.resume_check import resume_differences

    blocking, other = resume_differences(
        {"trainer": {"compile": False}},
        {"trainer": {"compile": {"backend": "inductor", "mode": "max-autotune"}}},
        has_schedule=True,
    )
    assert blocking == [] and len(other) == 3


def test_compiled_ddp_over_two_processes_equals_uncompiled_ddp() -> None:
    from tests.distributed import compile_workers
    from tests.distributed.spawn import run_processes

    compiled = run_processes(compile_workers.train, 2, {"backend": "aot_eager"}, 10)
    eager = run_processes(compile_workers.train, 2, False, 10)
    # The forward ran inside DDP's forward, where torch's DDP optimizer split its graph.
    assert all(rank["ddp_optimizer_graphs"] > 0 for rank in compiled)
    assert all(rank["ddp_optimizer_graphs"] == 0 for rank in eager)
    for rank in (0, 1):
        for key, value in eager[rank]["state"].items():
            torch.testing.assert_close(
                compiled[rank]["state"][key], value, rtol=1e-5, atol=1e-6, msg=key
            )


def test_the_cli_says_in_one_line_that_no_cpp_compiler_was_found(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = repo_env(
        CXX=str(tmp_path / "no-such-g++"),  # inductor's C++ compiler
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),  # no cached kernels
    )
    env.pop("TRAINKIT_DEBUG", None)
    # On the CPU: inductor compiles for a GPU with Triton, not the C++ compiler.
    overrides = ["trainer.accelerator=cpu", "trainer.compile=true", "trainer.max_epochs=1"]
    overrides.append("trainer.logger=false")
    overrides.append(f"trainer.default_root_dir={tmp_path}")
    done = subprocess.run(
        [sys.executable, "-m", "trainkit", "fit", "tests/configs/blobs.yaml", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("trainkit: error:")]
    assert len(lines) == 1, done.stderr[-3000:]
    assert "No working C++ compiler found" in lines[0] and "install a C++ compiler" in lines[0]
    assert "Traceback" not in done.stderr
