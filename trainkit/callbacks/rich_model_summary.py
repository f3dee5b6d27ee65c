"""RichModelSummary: ModelSummary's table drawn with rich (``pip install 'trainkit[rich]'``).

The same data as :class:`~trainkit.callbacks.model_summary.ModelSummary`
(:func:`~trainkit.callbacks.model_summary.summary_table`), printed as a rich
table followed by the totals. It is a ModelSummary, so the Trainer adds no
summary of its own beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainkit.callbacks.model_summary import ModelSummary, summary_table
from trainkit.callbacks.rich_progress import require_rich

if TYPE_CHECKING:
    import torch
    from rich.console import Console

    from trainkit.core.module import Module
    from trainkit.trainer.trainer import Trainer

# The summarize arguments Lightning's RichModelSummary reads.
_SUMMARIZE_KWARGS = {"header_style": "bold magenta"}


class RichModelSummary(ModelSummary):
    """Print the model summary as a rich table when ``fit`` starts; rank 0 only.

    Args:
        max_depth: how deep to list submodules (1: direct children; -1: all;
            0: no summary).
        summarize_kwargs: ``header_style``, the rich style of the table's header
            (default ``"bold magenta"``).

    Raises:
        ModuleNotFoundError: rich is not installed.
        TypeError: an unknown keyword argument.

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
        if unknown:
            raise TypeError(
                f"RichModelSummary got unknown arguments {', '.join(unknown)}; "
                f"it takes max_depth and {', '.join(_SUMMARIZE_KWARGS)}."
            )
        super().__init__(max_depth)
        self._summarize_kwargs = {**_SUMMARIZE_KWARGS, **summarize_kwargs}

    def on_fit_start(self, trainer: Trainer, module: Module) -> None:
        """Print the table for the user's module (nothing when ``max_depth`` is 0)."""
        if self.max_depth != 0 and trainer.is_global_zero:
            self.print_summary(module)

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
        from rich.table import Table
        from rich.text import Text

        data = summary_table(module, self.max_depth)
        if console is None:
            console = Console(**console_kwargs)
        if data.rows:
            table = Table(header_style=self._summarize_kwargs["header_style"])
            for name in data.header:
                table.add_column(
                    name or " ",
                    justify="right" if name == "Params" else "left",
                    style="dim" if not name else "",  # the row number
                    no_wrap=name == "Name",
                )
            for row in data.rows:
                table.add_row(*row)
            console.print(table)
        for value, label in data.totals:
            console.print(Text.assemble((label, "bold"), f": {value}"))
        if data.note:
            console.print(data.note, markup=False, highlight=False)
