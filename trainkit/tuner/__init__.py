"""Tuning before training: the learning rate finder and the batch size finder.

``Tuner(trainer).lr_find(model)`` and ``Tuner(trainer).scale_batch_size(model)``
run the searches on their own; the ``LearningRateFinder`` and ``BatchSizeFinder``
callbacks (``trainkit.callbacks``) run them when ``fit`` starts. Both leave the
run exactly as it was (weights, optimizer, counters, callbacks, loggers) and
write no file. Lightning's path: ``lightning.pytorch.tuner``.
"""

from trainkit.tuner.tuning import Tuner

__all__ = ["Tuner"]
