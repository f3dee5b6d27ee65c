"""RichModelSummary: ModelSummary's table drawn with rich (``pip install 'trainkit[rich]'``).

The same data as :class:`~trainkit.callbacks.model_summary.ModelSummary`
(:func:`~trainkit.callbacks.model_summary.summary_table`), printed as a rich
table followed by the totals. It is a ModelSummary, so the Trainer adds no
summary of its own beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainkit.callbacks.model_summary import ModelSummary, summary_table, summary_totals
from trainkit.callbacks.rich_progress import require_rich

if TYPE_CHECKING:
    import torch
    from rich.console import Console

# The summarize arguments RichModelSummary's own summarize reads, with their defaults.
_SUMMARIZE_KWARGS = {"header_style": "bold magenta"}


class RichModelSummary(ModelSummary):
    """Print the model summary as a rich table when ``fit`` starts; rank 0 only.

    As with :class:`ModelSummary`, the callback hands the summary to the static
    method :meth:`summarize`; this one draws it with rich on rich's console.

    Args:
        max_depth: how deep to list submodules (1: direct children; -1: all;
            0: no summary).
        summarize_kwargs: passed on to :meth:`summarize`; trainkit's reads
            ``header_style``, the rich style of the table's header (default
            ``"bold magenta"``). An override of ``summarize`` may take others.

    Raises:
        ModuleNotFoundError: rich is not installed.
        TypeError: an argument trainkit's ``summarize`` does not read (with no
            override of it to read it).

    Example:
        >>> import torch
        >>> summary = RichModelSummary(max_depth=2, header_style="bold")
        >>> summary.print_summary(torch.nn.Sequential(torch.nn.Linear(2, 3)), width=60)
        ┏━━━┳━━━━━━┳━━━━━━━━┳━━━━━━━━┳━━━━━━━┓
        ┃   ┃ Name ┃ Type   ┃ Params ┃ Mode  ┃
        ┡━━━╇━━━━━━╇━━━━━━━━╇━━━━━━━━╇━━━━━━━┩
        │ 0 │ 0    │ Linear │      9 │ train │
        └───┴──────┴────────┴────────┴───────┘
        Trainable params: 9
        Non-trainable params: 0
        Total params: 9
        Total estimated model params size (MB): 0.000
        Modules in train mode: 1
        Modules in eval mode: 0
    """

    def __init__(self, max_depth: int = 1, **summarize_kwargs: Any) -> None:
        require_rich(type(self).__name__)
        unknown = sorted(set(summarize_kwargs) - set(_SUMMARIZE_KWARGS))
        if unknown and type(self).summarize is RichModelSummary.summarize:
            raise TypeError(
                f"RichModelSummary got unknown arguments {', '.join(unknown)}; "
                f"it takes max_depth and {', '.join(_SUMMARIZE_KWARGS)} (an override of "
                "summarize() receives any others)."
            )
        super().__init__(max_depth, **summarize_kwargs)

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
        """Draw the summary with rich on rich's console (``rich.get_console()``).

        The arguments are :meth:`ModelSummary.summarize`'s; override it likewise.

        Args:
            summary_data: the table by column, ``(name, cells)``.
            total_parameters: every parameter's elements (lazy ones count 0).
            trainable_parameters: those of parameters that require gradients.
            model_size: the parameters' size in MB.
            total_training_modes: submodules in ``"train"`` and in ``"eval"`` mode.
            total_flops: the forward FLOPs on ``example_input_array`` (shown when the
                table has a FLOPs column).
            summarize_kwargs: ``header_style`` (default ``"bold magenta"``).
        """
        from rich import get_console

        _draw(
            get_console(),
            summary_data,
            total_parameters,
            trainable_parameters,
            model_size,
            total_training_modes,
            summarize_kwargs.get("header_style", _SUMMARIZE_KWARGS["header_style"]),
            total_flops,
        )

    def _print_note(self, note: str) -> None:
        from rich import get_console

        get_console().print(note, markup=False, highlight=False)

    def print_summary(
        self, module: torch.nn.Module, console: Console | None = None, **console_kwargs: Any
    ) -> None:
        """Print the summary of ``module`` to ``console`` (a new one on stdout by default).

        Args:
            module: the model to describe.
            console: where to print.
            console_kwargs: arguments of the console built when none is given.
        """
        from rich.console import Console

        data = summary_table(module, self.max_depth)
        if console is None:
            console = Console(**console_kwargs)
        style = self._summarize_kwargs.get("header_style", _SUMMARIZE_KWARGS["header_style"])
        _draw(
            console,
            data.summary_data,
            data.total_parameters,
            data.trainable_parameters,
            data.model_size,
            data.training_modes,
            style,
            data.total_flops or 0,
        )
        if data.note:
            console.print(data.note, markup=False, highlight=False)


def _draw(
    console: Console,
    summary_data: list[tuple[str, list[str]]],
    total_parameters: int,
    trainable_parameters: int,
    model_size: float,
    total_training_modes: dict[str, int],
    header_style: str,
    total_flops: int = 0,
) -> None:
    """The rich table of ``summary_data`` (if it has rows), then the totals, on ``console``."""
    from rich.table import Table
    from rich.text import Text

    rows = list(zip(*(cells for _, cells in summary_data), strict=True))
    if rows:
        table = Table(header_style=header_style)
        for name, _ in summary_data:
            number = not name.strip()  # the row number's column
            table.add_column(
                name if not number else " ",
                justify="right" if name == "Params" else "left",
                style="dim" if number else "",
                no_wrap=name == "Name",
            )
        for row in rows:
            table.add_row(*row)
        console.print(table)
    counted = any(name == "FLOPs" for name, _ in summary_data)
    for value, label in summary_totals(
        total_parameters,
        trainable_parameters,
        model_size,
        total_training_modes,
        total_flops if counted else None,
    ):
        label = "Total FLOPs" if label == "Total Flops" else label  # the rich table's spelling
        console.print(Text.assemble((label, "bold"), f": {value}"))
