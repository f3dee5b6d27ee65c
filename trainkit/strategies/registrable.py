"""What a strategy class tells the registry: its names, processes, launch and how to build it.

Every :class:`~trainkit.strategies.Strategy` has these class-level declarations
(:class:`~trainkit.strategies.base.Strategy` inherits them from
:class:`Registrable`); a strategy overrides the ones it changes.
:mod:`trainkit.strategies.registry` reads them for ``Trainer(strategy="name")``,
and :mod:`trainkit.launch` reads :meth:`Registrable.launch_mode` to choose a
launcher, so that neither keeps a list of strategy names of its own.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

if TYPE_CHECKING:
    from trainkit.launch.environment import ClusterEnvironment
    from trainkit.strategies.base import Strategy
    from trainkit.strategies.registry import DevicePlan

#: How a strategy's processes start when plain ``python`` runs the script:
#: ``"spawn"`` starts them from inside fit/validate/test/predict (notebooks can),
#: ``"script"`` re-runs the script's command for each other process.
LaunchMode = Literal["spawn", "script"]


class Registrable:
    """The class-level declarations the strategy registry reads (defaults: one process)."""

    #: Name used in ``Trainer(strategy=...)``; an instance reports it as ``strategy.name``.
    name: str = ""
    #: The names this class is registered under in trainkit (each built-in
    #: strategy's are in the registry's table; tests check the two agree).
    names: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def launch_mode(cls, name: str) -> LaunchMode | None:
        """How the processes of the strategy registered as ``name`` start; None: one process.

        Under torchrun or SLURM nothing is launched whatever this says (the
        processes exist already); ``"script"`` launches nothing for one process.

        Args:
            name: the registered name (a class may start differently under each).
        """
        return None

    @classmethod
    def processes(cls, plan: DevicePlan) -> int:
        """How many processes this strategy runs on this machine for ``plan``.

        The default: one per device for a strategy that launches processes, else one.

        Args:
            plan: the checked devices (see :func:`trainkit.strategies.plan_devices`).
        """
        return len(plan.indices) if cls.launch_mode(plan.strategy) is not None else 1

    @classmethod
    def from_plan(
        cls,
        plan: DevicePlan,
        *,
        timeout: timedelta = timedelta(minutes=30),
        environment: ClusterEnvironment | None = None,
        **init_params: Any,
    ) -> Strategy:
        """The strategy ``Trainer(strategy=plan.strategy)`` runs. Starts nothing.

        The default calls the class with ``init_params`` alone (as Lightning's
        registry does): a strategy that places itself by the plan overrides it.

        Args:
            plan: the checked devices.
            timeout: how long collectives wait for other processes.
            environment: this process's place in the job when a launcher decided it.
            init_params: the arguments the name was registered with.
        """
        return cast("Strategy", cls(**init_params))

    def join_as(self, environment: ClusterEnvironment | None) -> bool:
        """Take the place a launcher gives this process (strategies that launch override it).

        The default refuses, so no launcher is used for an instance of this class.

        Args:
            environment: the rank and world size the launcher gives this process;
                None for a launcher that starts new processes (``ddp_spawn``),
                each of which reads its place from the variables set for it.

        Returns:
            Whether this process now has ``environment``'s place.
        """
        return False
