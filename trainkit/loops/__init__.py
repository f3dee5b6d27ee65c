"""The loops: fit, evaluate and predict, the step, hooks, the run's state and results."""
