"""Where this process stands in a distributed job, and starting local workers."""

from trainkit.launch.environment import ClusterEnvironment, detect_environment
from trainkit.launch.launcher import launch_local_workers

__all__ = ["ClusterEnvironment", "detect_environment", "launch_local_workers"]
