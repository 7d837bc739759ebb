"""cluster_sim's Hydra launcher: every point of ``cluster-sim -m`` is a Ray task."""
