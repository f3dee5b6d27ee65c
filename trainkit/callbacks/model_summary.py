"""ModelSummary: print a table of the model's layers and parameter counts at fit start.

Totals count each parameter tensor once, even when submodules share it (tied
embeddings), so "Total params" is what the optimizer actually updates. Lazy
parameters have no shape until the first forward pass; they count as 0 and the
table says so.

The callback hands the data to its static method ``summarize`` (Lightning's
signature): override it to print, or log, the summary another way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.parameter import is_lazy

from trainkit.callbacks.base import Callback
from trainkit.callbacks.summary_forward import ForwardColumns, forward_columns

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


#: The row of the parameters no listed layer holds, and what its other cells show.
OTHER_PARAMETERS = "other params"
NOT_APPLICABLE = "n/a"


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
        total_parameters: every parameter's elements (lazy ones count 0).
        trainable_parameters: those of parameters that require gradients.
        model_size: the parameters' size in MB.
        training_modes: how many submodules are in ``"train"`` and in ``"eval"`` mode.
        total_flops: the model's forward FLOPs on ``example_input_array`` (None: no
            example input, so no FLOPs and sizes columns).
        forward: what the pass of ``example_input_array`` found per listed layer
            (None: no pass).
    """

    header: list[str]
    rows: list[list[str]]
    totals: list[tuple[str, str]]
    note: str | None = None
    total_parameters: int = 0
    trainable_parameters: int = 0
    model_size: float = 0.0
    training_modes: dict[str, int] = field(default_factory=lambda: {"train": 0, "eval": 0})
    total_flops: int | None = None
    forward: ForwardColumns | None = None

    @property
    def summary_data(self) -> list[tuple[str, list[str]]]:
        """The table by column, ``(name, cells)``, as ``ModelSummary.summarize`` receives it.

        The first column, the row number, is named ``" "`` (as Lightning names it).

        Example:
            >>> model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
            >>> summary_table(model).summary_data[:3]
            [(' ', ['0', '1']), ('Name', ['0', '1']), ('Type', ['Linear', 'ReLU'])]
        """
        return [
            (name or " ", [row[column] for row in self.rows])
            for column, name in enumerate(self.header)
        ]


def summarized_modules(
    module: torch.nn.Module, max_depth: int
) -> list[tuple[str, torch.nn.Module]]:
    """The submodules a summary lists, with their names, to ``max_depth`` (-1: all).

    At depth 1 every child by each name it has (a module registered twice is listed
    twice, as in Lightning's table); deeper, each module once, at its first name.

    Args:
        module: the model summarized.
        max_depth: how deep to list.
    """
    if max_depth == 1:
        return list(module.named_children())
    return [
        (name, submodule)
        for name, submodule in module.named_modules()
        if name and (max_depth == -1 or name.count(".") + 1 <= max_depth)
    ]


def summary_table(
    module: torch.nn.Module, max_depth: int = 1, forward: bool = True
) -> SummaryTable:
    """Collect the summary of ``module``: what :func:`summarize` formats.

    Args:
        module: the model to describe.
        max_depth: how deep to list submodules (1: direct children; -1: all;
            0: totals only).
        forward: run ``example_input_array`` (if the model sets one) through the
            model for the FLOPs, In sizes and Out sizes columns
            (``trainkit/callbacks/summary_forward.py``); not done while the model
            has uninitialized (lazy) parameters, which the pass would create.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU())
        >>> table = summary_table(model)
        >>> table.rows[0], table.totals[2]
        (['0', '0', 'Linear', '2.1 K', 'train'], ('2.1 K', 'Total params'))
    """
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < -1:
        raise ValueError(
            f"`max_depth` can be -1, 0 or > 0, got {max_depth}: pass -1 to list every layer, "
            "0 for the totals only, or n > 0 to list n levels of submodules."
        )
    header = ["", "Name", "Type", "Params", "Mode"]
    rows: list[list[str]] = []
    lazy_modules: list[str] = []
    layers: list[tuple[str, torch.nn.Module]] = []
    listed = 0  # the listed layers' parameters (one shared by two counts twice, as in Lightning)
    for name, submodule in summarized_modules(module, max_depth):
        layers.append((name, submodule))
        # parameters() skips repeats, so a tensor shared inside a submodule counts once.
        count, lazy = _count(list(submodule.parameters()))
        listed += count
        if lazy:
            lazy_modules.append(name)
        mode = "train" if submodule.training else "eval"
        rows.append([str(len(rows)), name, type(submodule).__name__, _params(count, lazy), mode])

    # Not with lazy parameters: the pass would create them, out of the training's order.
    lazy_model = any(is_lazy(p) for p in module.parameters())
    columns = forward_columns(module, layers) if forward and not lazy_model else None
    if columns is not None:
        header += ["FLOPs", "In sizes", "Out sizes"]
        for row, flops, in_sizes, out_sizes in zip(
            rows, columns.flops, columns.in_sizes, columns.out_sizes, strict=True
        ):
            row += [human_readable_count(flops), in_sizes, out_sizes]
    parameters = list(module.parameters())
    trainable, trainable_lazy = _count([p for p in parameters if p.requires_grad])
    frozen, frozen_lazy = _count([p for p in parameters if not p.requires_grad])
    if rows and trainable + frozen > listed:
        # Parameters of no listed layer (set on the model itself): one row, as Lightning's.
        other = human_readable_count(trainable + frozen - listed)
        rows.append([" ", OTHER_PARAMETERS, NOT_APPLICABLE, other, NOT_APPLICABLE])
        rows[-1] += [NOT_APPLICABLE] * (len(header) - len(rows[-1]))
    size_mb = sum(p.numel() * p.element_size() for p in parameters if not is_lazy(p)) / 1e6
    # Every submodule below the root, in train or in eval mode (as Lightning counts).
    modes = [submodule.training for name, submodule in module.named_modules() if name]
    training_modes = {"train": sum(modes), "eval": len(modes) - sum(modes)}
    total_flops = columns.total_flops if columns is not None else None
    totals = summary_totals(trainable + frozen, trainable, size_mb, training_modes, total_flops)
    note = None
    if trainable_lazy or frozen_lazy:
        where = ", ".join(lazy_modules) if lazy_modules else type(module).__name__
        note = (
            f"Note: {trainable_lazy + frozen_lazy} uninitialized (lazy) parameters in {where} "
            "count as 0; run one forward pass before summarizing to count them."
        )
    return SummaryTable(
        header,
        rows,
        totals,
        note,
        trainable + frozen,
        trainable,
        size_mb,
        training_modes,
        total_flops,
        columns,
    )


def summary_totals(
    total: int,
    trainable: int,
    size_mb: float,
    modes: dict[str, int],
    total_flops: int | None = None,
) -> list[tuple[str, str]]:
    """The totals under the summary table, as (value, label) pairs.

    Args:
        total: every parameter's elements.
        trainable: those of parameters that require gradients.
        size_mb: the parameters' size in MB.
        modes: how many submodules are in ``"train"`` and in ``"eval"`` mode.
        total_flops: the forward FLOPs on ``example_input_array`` (None: no line).

    Example:
        >>> summary_totals(2762, 2762, 0.011, {"train": 2, "eval": 0})[2]
        ('2.8 K', 'Total params')
    """
    flops = [] if total_flops is None else [(human_readable_count(total_flops), "Total Flops")]
    return [
        (human_readable_count(trainable), "Trainable params"),
        (human_readable_count(total - trainable), "Non-trainable params"),
        (human_readable_count(total), "Total params"),
        (f"{size_mb:,.3f}", "Total estimated model params size (MB)"),
        (str(modes.get("train", 0)), "Modules in train mode"),
        (str(modes.get("eval", 0)), "Modules in eval mode"),
        *flops,
    ]


def format_summary(
    summary_data: list[tuple[str, list[str]]],
    total_parameters: int,
    trainable_parameters: int,
    model_size: float,
    total_training_modes: dict[str, int],
    total_flops: int | None = None,
) -> str:
    """The summary's text: the table of ``summary_data`` (if it has rows), then the totals.

    What :meth:`ModelSummary.summarize` prints; its arguments are that method's.

    Args:
        summary_data: the table by column, ``(name, cells)``.
        total_parameters: every parameter's elements.
        trainable_parameters: those of parameters that require gradients.
        model_size: the parameters' size in MB.
        total_training_modes: submodules in ``"train"`` and in ``"eval"`` mode.
        total_flops: the forward FLOPs on ``example_input_array`` (None: no line).

    Example:
        >>> print(format_summary([(" ", ["0"]), ("Name", ["fc"])], 9, 9, 0.0, {"train": 1}))
        --------
          | Name
        --------
        0 | fc
        --------
        9         Trainable params
        0         Non-trainable params
        9         Total params
        0.000     Total estimated model params size (MB)
        1         Modules in train mode
        0         Modules in eval mode
    """
    lines: list[str] = []
    header = [name.strip() for name, _ in summary_data]
    rows = [list(row) for row in zip(*(cells for _, cells in summary_data), strict=True)]
    if rows:
        cells = [header, *rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
        formatted = [
            " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
            for row in cells
        ]
        rule = "-" * max(len(line) for line in formatted)
        lines = [rule, formatted[0], rule, *formatted[1:], rule]
    totals = summary_totals(
        total_parameters, trainable_parameters, model_size, total_training_modes, total_flops
    )
    lines.extend(f"{value:<10}{label}" for value, label in totals)
    return "\n".join(lines)


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
    return format_table(summary_table(module, max_depth))


def format_table(table: SummaryTable) -> str:
    """The text of a collected summary: its table, totals and note (if any).

    Args:
        table: what :func:`summary_table` collected.
    """
    text = format_summary(
        table.summary_data,
        table.total_parameters,
        table.trainable_parameters,
        table.model_size,
        table.training_modes,
        table.total_flops,
    )
    return f"{text}\n{table.note}" if table.note else text


def _params(count: int, lazy: int) -> str:
    text = human_readable_count(count)
    return f"{text} (+lazy)" if lazy else text


class ModelSummary(Callback):
    """Print the model summary table when ``fit`` starts; rank 0 only.

    The callback collects the summary and hands it to :meth:`summarize`, a
    static method with Lightning's signature: override it to show or log the
    summary your way (the ``summarize_kwargs`` given here are passed on to it).
    Left as it is, it prints trainkit's table (the one
    :func:`~trainkit.callbacks.model_summary.summarize` returns). A note on
    lazy (uninitialized) parameters, when there are any, is printed after
    whatever ``summarize`` shows.

    Args:
        max_depth: how deep to list submodules (1: direct children; -1: all;
            0: no summary).
        summarize_kwargs: passed on to :meth:`summarize`; trainkit's own
            ``summarize`` takes none, so they need a ``summarize`` override.

    Raises:
        ValueError: ``max_depth`` below -1.
        TypeError: ``summarize_kwargs`` without a ``summarize`` override to take them.

    Example:
        >>> class Totals(ModelSummary):
        ...     @staticmethod
        ...     def summarize(summary_data, total_parameters, trainable_parameters,
        ...                   model_size, total_training_modes, **summarize_kwargs):
        ...         print(f"{summarize_kwargs['prefix']}{total_parameters:,} parameters")
        >>> summary = Totals(max_depth=2, prefix="model: ")
    """

    def __init__(self, max_depth: int = 1, **summarize_kwargs: Any) -> None:
        if max_depth < -1:
            raise ValueError(
                f"ModelSummary(max_depth={max_depth}) must be -1 (all levels), 0 (no "
                "summary) or a positive depth."
            )
        if summarize_kwargs and type(self).summarize is ModelSummary.summarize:
            raise TypeError(
                f"{type(self).__name__} got unknown arguments "
                f"{', '.join(sorted(summarize_kwargs))}: it takes max_depth; other keyword "
                "arguments go to summarize(), so override summarize to use them."
            )
        self.max_depth = max_depth
        self._summarize_kwargs: dict[str, Any] = dict(summarize_kwargs)

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Summarize the user's module (nothing when ``max_depth`` is 0)."""
        if self.max_depth == 0 or not trainer.is_global_zero:
            return
        # One process: a forward pass of the example input on rank 0 alone would wait
        # forever for the others in a sharded or synchronised layer. Not compiled: the
        # pass would compile the forward at fit start, for a summary.
        forward = trainer.world_size == 1 and trainer.hardware.compile_options is None
        table = summary_table(module, self.max_depth, forward=forward)
        self.summarize(
            table.summary_data,
            table.total_parameters,
            table.trainable_parameters,
            table.model_size,
            dict(table.training_modes),
            total_flops=table.total_flops or 0,
            **self._summarize_kwargs,
        )
        if table.note:
            self._print_note(table.note)

    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int = 0,
        **summarize_kwargs: Any,
    ) -> None:
        """Show the summary: print the table of ``summary_data`` and the totals.

        Override it (as a static method, with this signature) to show the
        summary another way; the callback calls it on global rank 0 when
        ``fit`` starts.

        Args:
            summary_data: the table by column, ``(name, cells)``: ``" "`` (the
                row number), ``"Name"``, ``"Type"``, ``"Params"``, ``"Mode"``, and
                ``"FLOPs"``, ``"In sizes"``, ``"Out sizes"`` when the Module sets
                ``example_input_array``.
            total_parameters: every parameter's elements (lazy ones count 0).
            trainable_parameters: those of parameters that require gradients.
            model_size: the parameters' size in MB.
            total_training_modes: how many submodules are in ``"train"`` and in
                ``"eval"`` mode.
            total_flops: the forward FLOPs on ``example_input_array`` (0 without
                one: then no FLOPs column and no "Total Flops" line).
            summarize_kwargs: the callback's ``summarize_kwargs``.
        """
        counted = any(name == "FLOPs" for name, _ in summary_data)
        text = format_summary(
            summary_data,
            total_parameters,
            trainable_parameters,
            model_size,
            total_training_modes,
            total_flops if counted else None,
        )
        print(text, flush=True)

    def _print_note(self, note: str) -> None:
        """Print the note on lazy parameters after the summary."""
        print(note, flush=True)
