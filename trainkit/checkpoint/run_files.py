"""A run's checkpoint folder on disk: finding the runs of an experiment, choosing a free
file name, removing what an interrupted run wrote after the point a resume restarts from.

ModelCheckpoint decides *what* to save and keep (its top-k table); these functions
do the file work, and decide from the files alone which ones belong to this run:
every trainkit checkpoint carries its run's ``lineage`` and ``global_step``
(:func:`~trainkit.checkpoint.weights.peek`), so a file of another run is never
replaced or removed.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from trainkit.checkpoint import sharded
from trainkit.checkpoint.weights import peek

__all__ = [
    "as_score",
    "experiment_runs",
    "folders_to_clean",
    "free_path",
    "newest_version",
    "remove_future_files",
    "render_filename",
    "write_scores",
]


def experiment_runs(root: str) -> list[os.DirEntry[str]]:
    """The run folders (``version_N``, or a named version) of an experiment folder.

    Args:
        root: the experiment's folder (``<save_dir>/<name>``); missing: no runs.
    """
    try:
        return [entry for entry in os.scandir(root) if entry.is_dir()]
    except OSError:
        return []


def folders_to_clean(dirpath: str | None, runs_root: str | None, root_dir: str | None) -> list[str]:
    """The checkpoint folders where a killed save may have left temporary files.

    Args:
        dirpath: this run's checkpoint folder, if fixed.
        runs_root: the experiment's folder, whose runs' ``checkpoints`` folders count too.
        root_dir: the Trainer's root folder (``<root>/checkpoints`` holds the link to the
            newest ``last.ckpt``).
    """
    folders = [dirpath] if dirpath else []
    if runs_root is not None:
        folders += [os.path.join(run.path, "checkpoints") for run in experiment_runs(runs_root)]
    if root_dir is not None:
        folders.append(os.path.join(root_dir, "checkpoints"))
    return sorted(set(folders))


def free_path(
    path: str,
    ours: Iterable[str],
    lineage: str | None,
    versioned: Callable[[int], str],
    first: int = 1,
) -> str:
    """``path``, unless another run's file is there: then the first free version of it.

    A file of this run (in ``ours``, or a stale one of the same lineage from before a
    resume) is replaced; another run's never is.

    Args:
        path: the name the checkpoint would get.
        ours: the files this run keeps (its top-k and newest files).
        lineage: this run's lineage (shared by a run and its resumes).
        versioned: the name of version ``n`` of ``path`` (``epoch=1-v2.ckpt``).
        first: the first version tried.
    """
    kept, candidate, version = set(ours), path, first - 1
    while os.path.exists(candidate) and candidate not in kept:
        info = peek(candidate)
        if info is not None and info["lineage"] == lineage:
            break  # our own (a stale file from before a resume): replace it
        version += 1
        candidate = versioned(version)
    return candidate


def newest_version(path: str, join: str = "-") -> str:
    """``path``, or the newest of the versions of it that other runs wrote beside it.

    Args:
        path: a checkpoint's name (``last.ckpt``).
        join: what comes before a version (``last-v1.ckpt``: "-").

    Returns:
        The newest of ``path`` and its versions that exist; ``path`` if none does.
    """
    stem, extension = os.path.splitext(path)
    versions = glob.glob(f"{glob.escape(stem)}{join}v*{extension}")
    found = [name for name in [path, *versions] if sharded.exists(name)]
    return max(found, key=sharded.saved_at) if found else path


def remove_future_files(
    dirpath: str, keep: Iterable[str], lineage: str | None, global_step: int, extension: str
) -> None:
    """Remove this lineage's checkpoints saved after ``global_step`` (an interrupted run's).

    A resume restarts from ``global_step``; files the interrupted run wrote later
    would otherwise pose as this run's future. Other runs' files, and the ones in
    ``keep``, stay.

    Args:
        dirpath: this run's checkpoint folder.
        keep: files never removed (the top-k table's, ``last.ckpt``).
        lineage: this run's lineage.
        global_step: the step the resume restarts from.
        extension: the checkpoint files' extension (".ckpt").
    """
    if not os.path.isdir(dirpath):
        return
    kept = {os.path.abspath(path) for path in keep}
    for entry in os.scandir(dirpath):
        path = os.path.abspath(entry.path)
        if not entry.name.endswith(extension) or path in kept:
            continue
        info = peek(path)
        if info is not None and info["lineage"] == lineage and info["global_step"] > global_step:
            sharded.remove(path)


def as_score(value: Any) -> torch.Tensor:
    """A metric value as a detached 0-d CPU tensor (how scores are kept, as in Lightning).

    Args:
        value: a tensor of one element, or a number.
    """
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").reshape(())
    return torch.tensor(float(value))


def write_scores(scores: Mapping[str, Any], filepath: str | os.PathLike[str]) -> None:
    """Write checkpoint paths and their scores (tensors or numbers) to a YAML file.

    Args:
        scores: path -> score, as ``ModelCheckpoint.best_k_models`` holds them.
        filepath: the file to write.
    """
    import yaml  # only this needs it

    with open(filepath, "w") as handle:
        yaml.dump({path: float(value) for path, value in scores.items()}, handle)


# A field of a file-name template: {name} or {name:format}.
_FIELD = re.compile(r"\{([^{}:]+)(:[^{}]*)?\}")


def render_filename(
    template: str,
    metrics: Mapping[str, Any],
    equals: str | None,
    warn: Callable[[str, str], None],
) -> str:
    """A checkpoint's file name (without extension) from a ``{name:format}`` template.

    A field not among ``metrics`` is written as 0, with a warning; a "/" becomes "_"
    (every file stays in the checkpoint folder, where top-k and last can manage it),
    with a warning.

    Args:
        template: e.g. ``"{epoch}-{val_loss:.2f}"``.
        metrics: the values of the fields.
        equals: put ``name<equals>`` before each value (None: the value alone).
        warn: ``warn(key, message)``, called once per key by the caller's choice.

    Example:
        >>> warned = []
        >>> def warn(key, message):
        ...     warned.append(key)
        >>> render_filename("{epoch}-{val/loss:.2f}", {"epoch": 3, "val/loss": 0.5}, "=", warn)
        'epoch=3-val_loss=0.50'
        >>> render_filename("{epoch}-{acc}", {"epoch": 3}, None, warn), warned
        ('3-0', ['/', 'acc'])
    """

    def render(match: re.Match[str]) -> str:
        name, spec = match.group(1).strip(), (match.group(2) or "")[1:]
        value = metrics.get(name)
        if value is None:
            warn(
                name,
                f"ModelCheckpoint filename {template!r} uses {name!r}, which was not "
                f"logged (logged: {sorted(metrics)}); it is written as 0.",
            )
            value = 0
        shown = format(value, spec)
        return f"{name}{equals}{shown}" if equals is not None else shown

    name = _FIELD.sub(render, template)
    if "/" in name:
        warn(
            "/",
            f"ModelCheckpoint writes {name!r} as {name.replace('/', '_')!r}: trainkit "
            "keeps every checkpoint in dirpath, so '/' in a file name becomes '_'.",
        )
    return name.replace("/", "_")
