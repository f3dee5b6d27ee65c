"""The parts of reading a config that the config engine has no form for.

The engine (``trainkit.cli.engine``: LightningCLI's parser, jsonargparse) reads
and merges the files, resolves ``class_path``/``init_args``, checks every type and
fills in every default. What it has no form for is here: a ``key=value`` override
that reaches a list entry by its index (``trainer.callbacks.0.monitor``) or by
its class name (``trainer.callbacks.ModelCheckpoint.monitor``), and, inside a
``class_path`` entry, an init argument by its name alone (``model.lr`` for
``model.init_args.lr``) on the way to a list. The engine applies such an override
to the list as parsed so far with :func:`apply_override` and gives the list back
whole.
"""

from __future__ import annotations

import importlib
from typing import Any

from trainkit.utilities.messages import UsageError, did_you_mean


class ConfigError(UsageError, ValueError):
    """A configuration is wrong; the message names the key and the fix."""


def import_object(path: str) -> Any:
    """The object a dotted ``package.module.Name`` path names (a class, a function).

    Raises:
        ImportError: the module does not import.
        AttributeError: the module has no such name.

    Example:
        >>> import_object("collections.OrderedDict").__name__
        'OrderedDict'
    """
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def apply_override(config: dict[str, Any], item: str) -> None:
    """Apply one ``key=value`` override to ``config`` (plain containers), in place.

    Args:
        config: the config as read (mappings and lists).
        item: ``dotted.key=value``; a key reaches a list entry by
            index or by class name, and an entry's init argument by its name.

    Example:
        >>> run = {"trainer": {"callbacks": [{"class_path": "a.EarlyStopping", "init_args": {}}]}}
        >>> apply_override(run, "trainer.callbacks.EarlyStopping.patience=5")
        >>> run["trainer"]["callbacks"][0]["init_args"]
        {'patience': 5}
    """
    key, sep, text = item.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(
            f"Override {item!r} is not of the form key=value (e.g. trainer.max_epochs=5)."
        )
    value = _parse_value(text, item)
    parts = key.split(".")
    node: Any = config
    path = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if (
            isinstance(node, dict)
            and "class_path" in node
            and part not in ("class_path", "init_args")
        ):
            # The short form: a key inside a class_path entry is one of its init_args.
            if not isinstance(node.get("init_args"), dict):
                node["init_args"] = {}
            node, path = node["init_args"], _join(path, "init_args")
        if isinstance(node, list):
            position = _list_position(node, part, path)
            if last:
                if position == len(node):
                    node.append(value)
                else:
                    node[position] = value
                return
            if position == len(node):
                node.append({})
            if not isinstance(node[position], (dict, list)):
                node[position] = {}
            node, path = node[position], _join(path, position)
            continue
        if not isinstance(node, dict):
            raise ConfigError(
                f"Cannot set {key!r}: {path!r} is {_show(node)}, not a mapping or list "
                f"(set {path} as a whole instead)."
            )
        if last:
            node[part] = value
            return
        if not isinstance(node.get(part), (dict, list)):
            node[part] = {}
        node, path = node[part], _join(path, part)


def _parse_value(text: str, item: str) -> Any:
    # The value as OmegaConf reads a dot-list value (YAML, with its float forms).
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        parsed: Any = OmegaConf.to_container(
            OmegaConf.from_dotlist([f"value={text}"]), resolve=False
        )
        return parsed["value"]
    except Exception as error:  # yaml.YAMLError or OmegaConfBaseException
        if not isinstance(error, OmegaConfBaseException) and "yaml" not in type(error).__module__:
            raise
        reason = str(error).splitlines()[0]
        raise ConfigError(
            f"Override {item!r}: the value is not valid YAML ({reason}); quote it, e.g. "
            f"key='{text}'."
        ) from error


def _list_position(entries: list[Any], part: str, path: str) -> int:
    """The index ``part`` names in ``entries``: a number, or a class name."""
    try:
        position = int(part)
    except ValueError:
        position = -1
    else:
        if position < 0:
            position += len(entries)
        if not 0 <= position <= len(entries):
            raise ConfigError(
                f"{path!r} has {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, so "
                f"index {part} is out of range (use "
                f"0 to {len(entries) - 1}, or {len(entries)} to add an entry)."
            )
        return position
    names = [
        str(entry["class_path"]).rpartition(".")[2]
        for entry in entries
        if isinstance(entry, dict) and "class_path" in entry
    ]
    matches = [
        i
        for i, entry in enumerate(entries)
        if isinstance(entry, dict) and str(entry.get("class_path", "")).rpartition(".")[2] == part
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ConfigError(
            f"{len(matches)} entries of {path!r} are {part} (indices "
            f"{', '.join(map(str, matches))}); name the one you mean by index, e.g. "
            f"{path}.{matches[0]}."
        )
    hint = did_you_mean(part, names)
    raise ConfigError(
        f"No entry of {path!r} has the class {part!r}.{hint} (entries: "
        f"{', '.join(names) or 'none'}; use a class name from these, or an index)."
    )


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)
