"""Where this process stands in a distributed job, and starting local workers."""

from trainkit.launch.environment import ClusterEnvironment, detect_environment

__all__ = ["ClusterEnvironment", "detect_environment"]
