"""Checkpoints: the file format and its integrity, weights, restoring a run, Lightning's
format, sharded folders and what ``fit(ckpt_path=...)`` compares before resuming.

``from trainkit.checkpoint import load, CheckpointError`` reads the file layer;
the other modules are imported by name.
"""

from trainkit.checkpoint.files import CheckpointError, consolidate_checkpoint, load, save_atomic

__all__ = ["CheckpointError", "consolidate_checkpoint", "load", "save_atomic"]
