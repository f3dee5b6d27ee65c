"""What ``Trainer(plugins=...)`` asks of each Lightning plugin trainkit accepts."""

from __future__ import annotations

from typing import Any

_PREFIX = "trainkit.lightning.plugins."


class Plugin:
    """A plugin standing for trainkit options: it sets them, or says why it cannot."""

    def trainkit_plugin_refusal(self) -> str | None:
        """None: trainkit does what this plugin asks; else why it cannot."""
        if not type(self).__module__.startswith(_PREFIX):
            base = next(cls for cls in type(self).__mro__ if cls.__module__.startswith(_PREFIX))
            return (
                f"a subclass of {base.__name__}: trainkit applies what the plugin sets with "
                "its own code and cannot run the subclass's methods in their place; pass "
                f"the setting itself ({self._option()})"
            )
        return None

    def trainkit_plugin_settings(self) -> dict[str, Any]:
        """The Trainer options this plugin sets."""
        return {}

    def _option(self) -> str:
        return "Trainer(...)"

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
