"""The strategy names ``Trainer(strategy=...)`` accepts, and what each one builds.

One table names the built-in strategies; each entry is read through its class's
declarations (:class:`~trainkit.strategies.registrable.Registrable`): how many
processes it runs, how they start, how it is built from a :class:`DevicePlan`.
The built-in classes are imported when a name is first used, so that
``import trainkit.strategies`` does not load FSDP, the hybrid strategy or
DataParallel. Add your own strategy with :meth:`Registry.register` (the call
Lightning's ``StrategyRegistry.register`` takes).

Example:
    >>> from trainkit.strategies import SingleDeviceStrategy, StrategyRegistry
    >>> class OnCpu(SingleDeviceStrategy):
    ...     pass
    >>> _ = StrategyRegistry.register("on_cpu", OnCpu, description="one CPU process")
    >>> type(StrategyRegistry.build(DevicePlan("on_cpu", "cpu", (0,)))).__name__
    'OnCpu'
    >>> StrategyRegistry.remove("on_cpu")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, overload

from trainkit.strategies.base import Strategy
from trainkit.utilities.messages import did_you_mean

if TYPE_CHECKING:
    from trainkit.launch.environment import ClusterEnvironment
    from trainkit.strategies.registrable import LaunchMode

S = TypeVar("S", bound=type[Strategy])

#: The built-in names and the class each builds ("module:Class", imported on first use).
BUILT_IN = {
    "single_device": "trainkit.strategies.single:SingleDeviceStrategy",
    "ddp": "trainkit.strategies.ddp:DDPStrategy",
    "ddp_spawn": "trainkit.strategies.ddp:DDPStrategy",
    "dp": "trainkit.strategies.dp:DataParallelStrategy",
    "hybrid": "trainkit.strategies.hybrid:HybridStrategy",
    "fsdp": "trainkit.strategies.fsdp:FSDPStrategy",
}

#: Lightning's registered names for a built-in strategy built with other arguments:
#: each starts as the built-in one it names (its processes, its launch).
LIGHTNING_NAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "ddp_find_unused_parameters_true": ("ddp", {"find_unused_parameters": True}),
    "ddp_find_unused_parameters_false": ("ddp", {"find_unused_parameters": False}),
    "ddp_spawn_find_unused_parameters_true": ("ddp_spawn", {"find_unused_parameters": True}),
    "ddp_spawn_find_unused_parameters_false": ("ddp_spawn", {"find_unused_parameters": False}),
    "fsdp_cpu_offload": ("fsdp", {"cpu_offload": True}),
}

#: Lightning's names for ranks forked from this process, which trainkit does not start.
_FORKED = tuple(
    f"{kind}{suffix}"
    for kind in ("ddp_fork", "ddp_notebook")
    for suffix in ("", "_find_unused_parameters_true", "_find_unused_parameters_false")
)


@dataclass(frozen=True)
class DevicePlan:
    """What ``accelerator``, ``devices`` and ``strategy`` ask for, checked against this machine.

    Attributes:
        strategy: the strategy's name ("auto" resolved).
        device_type: "cpu" or "cuda".
        indices: the device indices (on the CPU, one per process).
    """

    strategy: str
    device_type: str
    indices: tuple[int, ...]

    @property
    def processes(self) -> int:
        """How many processes the strategy runs on this machine (its class says).

        Example:
            >>> DevicePlan("hybrid", "cuda", (0, 1, 2, 3)).processes
            2
        """
        return StrategyRegistry.strategy_class(self.strategy).processes(self)


@dataclass(frozen=True)
class StrategyEntry:
    """One registered name.

    Attributes:
        name: the name ``Trainer(strategy=...)`` takes.
        location: the class, or where a built-in one is ("module:Class").
        description: what the name is for, in words.
        init_params: keyword arguments the class is built with.
        launch_as: the name whose launch this one's processes start by (a Lightning
            name for a built-in strategy with other arguments); None: its own.
    """

    name: str
    location: type[Strategy] | str
    description: str = ""
    init_params: Mapping[str, Any] = field(default_factory=dict)
    launch_as: str | None = None

    def strategy_class(self) -> type[Strategy]:
        """The class this name builds (a built-in one is imported here, once)."""
        if not isinstance(self.location, str):
            return self.location
        module, _, attribute = self.location.partition(":")
        found: type[Strategy] = getattr(importlib.import_module(module), attribute)
        return found


class Registry:
    """Strategy names and what they build; ``StrategyRegistry`` is the one the Trainer reads."""

    def __init__(self) -> None:
        self._entries = {name: StrategyEntry(name, where) for name, where in BUILT_IN.items()}
        for name, (base, params) in LIGHTNING_NAMES.items():
            arguments = ", ".join(f"{key}={value}" for key, value in params.items())
            self._entries[name] = StrategyEntry(
                name, BUILT_IN[base], f"{base!r} with {arguments}", params, base
            )

    @overload
    def register(
        self,
        name: str,
        strategy: None = None,
        description: str | None = None,
        override: bool = False,
        **init_params: Any,
    ) -> Callable[[S], S]: ...

    @overload
    def register(
        self,
        name: str,
        strategy: S,
        description: str | None = None,
        override: bool = False,
        **init_params: Any,
    ) -> S: ...

    def register(
        self,
        name: str,
        strategy: S | None = None,
        description: str | None = None,
        override: bool = False,
        **init_params: Any,
    ) -> S | Callable[[S], S]:
        """Make ``Trainer(strategy=name)`` build ``strategy`` (as Lightning's registry does).

        Used as ``register(name, MyStrategy, ...)`` or as a class decorator
        ``@StrategyRegistry.register(name, ...)``. The class's declarations
        (:class:`~trainkit.strategies.registrable.Registrable`) say how it is
        built, how many processes it runs and how they start.

        Args:
            name: the name ``Trainer(strategy=...)`` and the config's ``trainer.strategy`` take.
            strategy: a :class:`~trainkit.strategies.Strategy` subclass (None: decorator form).
            description: what the name is for, in words.
            override: replace a name that is registered already.
            init_params: keyword arguments the class is built with (after the plan's).

        Returns:
            ``strategy``; without it, a decorator that registers the class it is
            given and returns it unchanged.
        """
        if not isinstance(name, str) or not name or name == "auto":
            raise ValueError(
                f"Cannot register a strategy as {name!r}: give a non-empty name other "
                "than 'auto' (which picks single_device or ddp)."
            )
        if name in self._entries and not override:
            raise ValueError(
                f"Strategy name {name!r} is registered already (to "
                f"{self._entries[name].location}); pass override=True to replace it."
            )

        def add(cls: S) -> S:
            if not (isinstance(cls, type) and issubclass(cls, Strategy)):
                raise TypeError(
                    f"register({name!r}, ...) needs a Strategy subclass (its class "
                    f"declarations say how it is built), got {cls!r}. Subclass "
                    "trainkit.strategies.Strategy, or one of its strategies."
                )
            self._entries[name] = StrategyEntry(name, cls, description or "", dict(init_params))
            return cls

        return add if strategy is None else add(strategy)

    def remove(self, name: str) -> None:
        """Forget a registered name.

        Args:
            name: a registered name (else a KeyError, as Lightning's registry raises).
        """
        if name not in self._entries:
            raise KeyError(f"{name!r} is not a registered strategy; registered: {list(self)}")
        del self._entries[name]

    def available_strategies(self) -> list[str]:
        """The registered names, built-in ones first."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def entry(self, name: str) -> StrategyEntry:
        """What ``name`` is registered as; a ValueError naming the valid names if nothing.

        Args:
            name: a strategy name.
        """
        found = self._entries.get(name)
        if found is None and name in _FORKED:
            raise ValueError(
                f"strategy={name!r} forks this process for the other ranks, which trainkit "
                "does not do. Use strategy='ddp_spawn' (from a notebook: define the Module and "
                "the data in a .py file beside it and import them), or run the script with "
                "strategy='ddp'."
            )
        if found is None:
            valid = ["auto", *self._entries]
            raise ValueError(
                f"Unknown strategy {name!r}; valid strategies are {valid}."
                f"{did_you_mean(name, valid)}"
            )
        return found

    def strategy_class(self, name: str) -> type[Strategy]:
        """The class ``name`` builds.

        Args:
            name: a registered name.
        """
        return self.entry(name).strategy_class()

    def launch_mode(self, name: str) -> LaunchMode | None:
        """How the processes of strategy ``name`` start (see ``trainkit.launch``).

        Args:
            name: a registered name.
        """
        entry = self.entry(name)
        return entry.strategy_class().launch_mode(entry.launch_as or name)

    def build(
        self,
        plan: DevicePlan,
        *,
        timeout: timedelta = timedelta(minutes=30),
        environment: ClusterEnvironment | None = None,
    ) -> Strategy:
        """The strategy ``plan`` names, built by its class with its registered arguments.

        Args:
            plan: from :func:`trainkit.strategies.plan_devices`.
            timeout: how long collectives wait for other processes.
            environment: this process's place in the job, when a launcher decided it.
        """
        entry = self.entry(plan.strategy)
        # Registered arguments win over the Trainer's (a name may fix its own timeout).
        options = {"timeout": timeout, "environment": environment, **entry.init_params}
        return entry.strategy_class().from_plan(plan, **options)


#: The names ``Trainer(strategy=...)`` accepts (Lightning's ``StrategyRegistry``).
StrategyRegistry = Registry()
