"""TensorBoardLogger: scalars and hyperparameters in TensorBoard event files."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from argparse import Namespace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainkit.loggers._event_file import FLUSH_SECONDS, EventFile
from trainkit.loggers._files import _write_hparams_yaml
from trainkit.loggers._tracking import on_rank_zero, other_ranks_experiment, with_prefix
from trainkit.loggers.base import FolderLogger, hyperparameters

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


class TensorBoardLogger(FolderLogger):
    """Write metrics and hyperparameters for TensorBoard.

    Each run writes to ``<save_dir>/<name>/version_<N>/`` (or
    ``<save_dir>/<name>/<version>`` when ``version`` is a string). Nothing is
    created until the logger is first used, so a Trainer that never logs
    leaves no empty folders behind. A logger keeps one event file: fit, then
    validate and test with the same Trainer, append to it.

    The HParams tab: ``log_hyperparams`` writes the run's hyperparameters as a
    TensorBoard *session*, and ``finalize`` writes how the session ended. No
    experiment summary is written (Lightning writes one naming only
    ``hp_metric``), so TensorBoard lists every scalar the runs logged as a
    metric column, each run showing its last value: runs compare on
    ``val_loss``, ``val_acc``, ... with nothing to declare.

    Args:
        save_dir: root folder for all experiments (``~`` and ``$VAR`` are expanded).
        name: experiment name, the folder under ``save_dir`` (None or "": none).
        version: ``None`` claims the next free ``version_N``, never sharing or
            overwriting an existing folder, even with concurrent processes. An
            explicit version is reused if it exists, which is how a resumed run
            keeps appending to the same run.
        log_graph: at the start of ``fit``, add the model's graph (traced on
            ``example_input_array``) to TensorBoard's Graphs tab. The trace runs in
            eval mode (as torch's ``add_graph`` does), without gradients, and the
            random generators are put back afterwards (Lightning does not), so that
            drawing the graph changes nothing the run computes.
        default_hp_metric: when hyperparameters are logged without metrics, log
            ``hp_metric=-1`` with them, so that TensorBoard's HParams tab lists the
            run (log the real value under "hp_metric" to replace it), as Lightning does.
        prefix: put ``<prefix>-`` in front of every metric name.
        sub_dir: write the event files and ``hparams.yaml`` to
            ``<save_dir>/<name>/<version>/<sub_dir>``; the run's checkpoints stay in
            ``<save_dir>/<name>/<version>/checkpoints``.
        **kwargs: options of torch's ``SummaryWriter`` (``comment``, ``purge_step``,
            ``max_queue``, ``flush_secs``, ``filename_suffix``), for ``experiment``;
            ``flush_secs`` also sets how often the scalars reach the disk (5 s by default).
    """

    #: The hyperparameters file in ``log_dir`` (Lightning's attribute).
    NAME_HPARAMS_FILE = "hparams.yaml"

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str | None = "logs",
        version: int | str | None = None,
        log_graph: bool = False,
        default_hp_metric: bool = True,
        prefix: str = "",
        sub_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = sorted(set(kwargs) - _WRITER_OPTIONS)
        if unknown:
            raise TypeError(
                f"TensorBoardLogger got unknown option(s) {', '.join(unknown)}. Besides its own "
                "arguments it takes those of torch's SummaryWriter: "
                f"{', '.join(sorted(_WRITER_OPTIONS))}."
            )
        # "~" and "$VAR" in the folder are expanded, as Lightning's TensorBoardLogger does.
        super().__init__(os.path.expanduser(os.path.expandvars(save_dir)), name, version)
        self.default_hp_metric = default_hp_metric
        self._log_graph = log_graph
        self._prefix = prefix
        self._sub_dir = None if sub_dir is None else os.fspath(sub_dir)
        self._writer_options = kwargs
        self._flush_seconds = float(kwargs.get("flush_secs", FLUSH_SECONDS))
        self._writer: SummaryWriter | None = None
        # Scalars and hparams go through our own event file (see _event_file.py);
        # the SummaryWriter exists only when a user asks for `experiment`.
        self._events: EventFile | None = None
        # The event file this logger writes, kept so that a reopened logger appends to it.
        self._events_path: str | None = None
        # Whether the HParams session was started (hyperparameters written) and
        # not yet given its end; TensorBoard keeps the first end record only.
        self._session_open = False

    @property
    def experiment(self) -> SummaryWriter:
        """The underlying ``SummaryWriter``, e.g. for ``logger.experiment.add_image``.

        Opened on first use; after ``finalize`` a new one is opened on the same folder. On
        a global rank other than 0: a stand-in that takes any call and does nothing, as
        Lightning's gives (only rank 0 writes the run's files).
        """
        if self._writer is None:
            if not on_rank_zero():
                return other_ranks_experiment()  # type: ignore[no-any-return]
            # Lazy: importing tensorboard costs about a second.
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=self._made_log_dir(), **self._writer_options)
        return self._writer

    @property
    def log_dir(self) -> str:
        """The folder of the event files: the run's folder, or ``sub_dir`` inside it."""
        run = self.run_dir
        return run if self._sub_dir is None else os.path.join(run, self._sub_dir)

    @property
    def sub_dir(self) -> str | None:
        """The folder inside the run's folder that holds the event files (None: none)."""
        return self._sub_dir

    def log_graph(self, model: Any, input_array: Any = None) -> None:
        """Add ``model``'s graph to the Graphs tab (only with ``log_graph=True``).

        Args:
            model: the model to trace.
            input_array: its input (None: ``model.example_input_array``).
        """
        if not self._log_graph:
            return
        import torch

        if input_array is None:
            input_array = getattr(model, "example_input_array", None)
        if input_array is None:
            warnings.warn(
                "Could not log computational graph to TensorBoard: The "
                "`model.example_input_array` attribute is not set or `input_array` was not "
                f"given. Set {type(model).__name__}.example_input_array to one input batch in "
                "the Module's __init__, or pass TensorBoardLogger(log_graph=False).",
                stacklevel=2,
            )
            return
        if not isinstance(input_array, (torch.Tensor, tuple)):
            # A dict or list would reach forward as one argument (a dict of inputs
            # cannot be traced as keyword arguments): Lightning's rule, and its words.
            warnings.warn(
                "Could not log computational graph to TensorBoard: The `input_array` or "
                f"`model.example_input_array` has type {type(input_array)} which can't be "
                "traced by TensorBoard. Make the input array a tuple representing the "
                "positional arguments to the model's `forward()` implementation.",
                stacklevel=2,
            )
            return
        if _is_sharded(model):
            warnings.warn(
                "TensorBoardLogger(log_graph=True) does not draw the graph of a model whose "
                "parameters are sharded across processes (FSDP): its forward needs every "
                "process, and only global rank 0 logs. Draw it from a run with one process "
                "or DDP, or pass log_graph=False.",
                stacklevel=2,
            )
            return
        _add_graph(self.experiment, model, input_array)

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Write each metric as a scalar at ``step``.

        Args:
            metrics: metric name to value.
            step: the global step the values belong to (None, as Lightning allows: 0).
        """
        if self._prefix:
            metrics = with_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR)
        self._event_file().add_scalars(metrics, 0 if step is None else step)

    def log_hyperparams(
        self,
        params: Mapping[str, Any] | Namespace,
        metrics: Mapping[str, float] | None = None,
        step: int | None = None,
    ) -> None:
        """Write ``hparams.yaml`` and the HParams-tab summary.

        Nested mappings become ``/``-joined names (``{"optim": {"lr": 0.1}}`` is
        shown as ``optim/lr``); values TensorBoard cannot show are written as strings.

        Args:
            params: hyperparameter name to value (nested mappings allowed).
            metrics: values to show beside them in the HParams tab (default:
                ``{"hp_metric": -1}`` with ``default_hp_metric=True``).
            step: the step ``metrics`` are written at (default 0).
        """
        from torch.utils.tensorboard.summary import hparams

        params = hyperparameters(params)

        _write_hparams_yaml(self._made_log_dir(), params)
        if metrics is None and self.default_hp_metric:
            metrics = {"hp_metric": -1}
        if metrics:
            self.log_metrics(metrics, 0 if step is None else step)
        # SummaryWriter.add_hparams would write to a new sub-folder (a separate run
        # in TensorBoard); writing the protos ourselves keeps them with the scalars.
        # Only the session start: an experiment summary would fix the HParams tab's
        # metric columns to the names known now (see the class docstring).
        _, session_start, _ = hparams(_flatten_for_tensorboard(params), metric_dict={})  # type: ignore[no-untyped-call]
        self._event_file().add_summary(session_start)
        self._session_open = True

    def _event_file(self) -> EventFile:
        if self._events is None:
            self._events = EventFile(
                self._made_log_dir(), flush_seconds=self._flush_seconds, path=self._events_path
            )
            self._events_path = self._events.path
        return self._events

    def _made_log_dir(self) -> str:
        folder = self.log_dir
        if self._sub_dir is not None:
            os.makedirs(folder, exist_ok=True)  # the run's folder exists once claimed
        return folder

    def __getstate__(self) -> dict[str, Any]:
        # Picklable, as Lightning's loggers are: what the open writer and event file
        # hold is flushed and they are left out; a copy that writes again appends to
        # the same event file.
        self.save()
        state = self.__dict__.copy()
        state["_writer"] = state["_events"] = None
        return state

    def save(self) -> None:
        """Flush pending events to disk."""
        if self._events is not None:
            self._events.flush()
        if self._writer is not None:
            self._writer.flush()

    def finalize(self, status: str) -> None:
        """Flush and close the event file; safe to call more than once.

        Args:
            status: "success", "failed" or "interrupted".
        """
        if self._session_open and status in _SESSION_STATUSES:
            # An interrupted run gets no end record: TensorBoard keeps a session's
            # first one, and the resumed run (same folder) writes the real end.
            self._event_file().add_summary(_session_end(_SESSION_STATUSES[status]))
        self._session_open = False
        if self._version is not None and os.path.isdir(folder := self.log_dir):
            # As Lightning's: a run's folder has an hparams.yaml (empty without
            # hyperparameters) for load_from_checkpoint(hparams_file=...). Never replaces one.
            with (
                contextlib.suppress(FileExistsError),
                open(os.path.join(folder, self.NAME_HPARAMS_FILE), "x", encoding="utf-8") as file,
            ):
                file.write("{}\n")
        if self._events is not None:
            self._events.close()
            self._events = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None


# The keyword arguments of torch's SummaryWriter besides log_dir.
_WRITER_OPTIONS = frozenset({"comment", "purge_step", "max_queue", "flush_secs", "filename_suffix"})


def _add_graph(writer: SummaryWriter, model: Any, input_array: Any) -> None:
    """Trace ``model`` on ``input_array`` into ``writer``, leaving the run as it was.

    Eval mode and no gradients: no dropout draws, no batch-norm statistics updated;
    a forward that draws random numbers anyway (noise layers) has the generators
    put back afterwards.
    """
    import torch

    from trainkit.core.batches import move_data_to_device
    from trainkit.core.export import exporting
    from trainkit.utilities.seed import isolated_rng

    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    with exporting(model), isolated_rng(), torch.no_grad():
        writer.add_graph(model, move_data_to_device(input_array, device))


def _is_sharded(model: Any) -> bool:
    """Whether any parameter is a DTensor (sharded by FSDP)."""
    import torch.distributed as dist

    if not dist.is_available():
        return False
    from torch.distributed.tensor import DTensor

    return any(isinstance(parameter, DTensor) for parameter in model.parameters())


# The run's ending (``finalize``'s status) as the HParams plugin's session status.
_SESSION_STATUSES = {"success": "STATUS_SUCCESS", "failed": "STATUS_FAILURE"}


def _session_end(status: str) -> Any:
    """The HParams plugin's session-end summary with ``status`` (an ``api_pb2.Status`` name)."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    content = plugin_data_pb2.HParamsPluginData(
        session_end_info=plugin_data_pb2.SessionEndInfo(
            status=api_pb2.Status.Value(status),
            end_time_secs=time.time(),
        ),
        version=metadata.PLUGIN_DATA_VERSION,
    )
    plugin = SummaryMetadata.PluginData(
        plugin_name=metadata.PLUGIN_NAME, content=content.SerializeToString()
    )
    value = Summary.Value(
        tag=metadata.SESSION_END_INFO_TAG, metadata=SummaryMetadata(plugin_data=plugin)
    )
    return Summary(value=[value])


def _flatten_for_tensorboard(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested mappings to ``a/b`` keys; keep numbers and strings, stringify the rest."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        full_key = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten_for_tensorboard(value, prefix=f"{full_key}/"))
        elif isinstance(value, (bool, int, float, str)):
            flat[full_key] = value
        else:
            # None, lists and arbitrary objects: torch's hparams() drops or rejects them.
            flat[full_key] = str(value)
    return flat
