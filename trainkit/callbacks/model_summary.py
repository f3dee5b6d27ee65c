"""ModelSummary: print a table of the model's layers and parameter counts at fit start.

Totals count each parameter tensor once, even when submodules share it (tied
embeddings), so "Total params" is what the optimizer actually updates. Lazy
parameters have no shape until the first forward pass; they count as 0 and the
table says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch.nn.parameter import is_lazy

from trainkit.callbacks.base import Callback

if TYPE_CHECKING:
    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

_UNITS = ("", "K", "M", "B", "T")


def human_readable_count(number: int) -> str:
    """Format a parameter count with a K/M/B/T suffix, 3 significant digits.

    Args:
        number: a non-negative count.

    Returns:
        The count, e.g. ``"650"``, ``"2.8 K"``, ``"123 K"``, ``"1.2 M"``.

    Example:
        >>> [human_readable_count(n) for n in (650, 2762, 123_456, 1_200_000)]
        ['650', '2.8 K', '123 K', '1.2 M']
    """
    digits = int(math.log10(number)) + 1 if number > 0 else 1
    index = min((digits - 1) // 3, len(_UNITS) - 1)
    if index == 0:
        return str(number)
    scaled = number / 1000**index
    text = f"{int(scaled):,d}" if scaled >= 100 else f"{scaled:.1f}"
    return f"{text} {_UNITS[index]}"


def _count(parameters: list[torch.nn.Parameter]) -> tuple[int, int]:
    """(initialized element count, number of lazy parameter tensors)."""
    lazy = sum(1 for p in parameters if is_lazy(p))
    return sum(p.numel() for p in parameters if not is_lazy(p)), lazy


@dataclass
class SummaryTable:
    """What a model summary shows, before it is formatted.

    Args:
        header: the layer table's column names.
        rows: one row of cells per listed submodule.
        totals: (value, label) pairs: parameter counts, size, modules per mode.
        note: a note on lazy parameters, or None.
    """

    header: list[str]
    rows: list[list[str]]
    totals: list[tuple[str, str]]
    note: str | None = None


def summary_table(module: torch.nn.Module, max_depth: int = 1) -> SummaryTable:
    """Collect the summary of ``module``: what :func:`summarize` formats.

    Args:
        module: the model to describe.
        max_depth: how deep to list submodules (1: direct children; -1: all;
            0: totals only).

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU())
        >>> table = summary_table(model)
        >>> table.rows[0], table.totals[2]
        (['0', '0', 'Linear', '2.1 K', 'train'], ('2.1 K', 'Total params'))
    """
    if max_depth < -1:
        raise ValueError(f"summarize(max_depth={max_depth}) must be -1 (all), 0 or more.")
    header = ["", "Name", "Type", "Params", "Mode"]
    rows: list[list[str]] = []
    lazy_modules: list[str] = []
    for name, submodule in module.named_modules():
        depth = name.count(".") + 1
        if not name or (max_depth != -1 and depth > max_depth):
            continue
        # parameters() skips repeats, so a tensor shared inside a submodule counts once.
        count, lazy = _count(list(submodule.parameters()))
        if lazy:
            lazy_modules.append(name)
        mode = "train" if submodule.training else "eval"
        rows.append([str(len(rows)), name, type(submodule).__name__, _params(count, lazy), mode])

    parameters = list(module.parameters())
    trainable, trainable_lazy = _count([p for p in parameters if p.requires_grad])
    frozen, frozen_lazy = _count([p for p in parameters if not p.requires_grad])
    size_mb = sum(p.numel() * p.element_size() for p in parameters if not is_lazy(p)) / 1e6
    totals = [
        (human_readable_count(trainable), "Trainable params"),
        (human_readable_count(frozen), "Non-trainable params"),
        (human_readable_count(trainable + frozen), "Total params"),
        (f"{size_mb:,.3f}", "Total estimated model params size (MB)"),
    ]
    # Every submodule below the root, in train or in eval mode (as Lightning counts).
    modes = [submodule.training for name, submodule in module.named_modules() if name]
    totals += [
        (str(sum(modes)), "Modules in train mode"),
        (str(len(modes) - sum(modes)), "Modules in eval mode"),
    ]
    note = None
    if trainable_lazy or frozen_lazy:
        where = ", ".join(lazy_modules) if lazy_modules else type(module).__name__
        note = (
            f"Note: {trainable_lazy + frozen_lazy} uninitialized (lazy) parameters in {where} "
            "count as 0; run one forward pass before summarizing to count them."
        )
    return SummaryTable(header, rows, totals, note)


def summarize(module: torch.nn.Module, max_depth: int = 1) -> str:
    """Build the summary table of ``module``.

    Args:
        module: the model to describe.
        max_depth: how deep to list submodules (1: direct children; -1: all;
            0: totals only).

    Returns:
        The table and totals as one string.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU())
        >>> print(summarize(model).splitlines()[-4])
        2.1 K     Total params
    """
    table = summary_table(module, max_depth)
    lines: list[str] = []
    if table.rows:
        cells = [table.header, *table.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(table.header))]
        formatted = [
            " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
            for row in cells
        ]
        rule = "-" * max(len(line) for line in formatted)
        lines = [rule, formatted[0], rule, *formatted[1:], rule]
    lines.extend(f"{value:<10}{label}" for value, label in table.totals)
    if table.note:
        lines.append(table.note)
    return "\n".join(lines)


def _params(count: int, lazy: int) -> str:
    text = human_readable_count(count)
    return f"{text} (+lazy)" if lazy else text


class ModelSummary(Callback):
    """Print the model summary table when ``fit`` starts; rank 0 only.

    Args:
        max_depth: how deep to list submodules (1: direct children; -1: all;
            0: no summary).

    Example:
        >>> summary = ModelSummary(max_depth=2)
    """

    def __init__(self, max_depth: int = 1) -> None:
        if max_depth < -1:
            raise ValueError(
                f"ModelSummary(max_depth={max_depth}) must be -1 (all levels), 0 (no "
                "summary) or a positive depth."
            )
        self.max_depth = max_depth

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Print the table for the user's module (nothing when ``max_depth`` is 0)."""
        if self.max_depth != 0 and trainer.is_global_zero:
            print(summarize(module, self.max_depth), flush=True)
