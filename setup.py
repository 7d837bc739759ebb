"""Packaging beyond what pyproject.toml can say: the top-level ``conf/`` and ``traces/`` folders
ship inside the wheel as ``cluster_sim/conf`` and ``cluster_sim/traces`` (package data), so a
regular ``pip install .`` runs from any folder (cluster_sim/locations.py finds them). The
repository keeps them at the top, where the project layout wants them."""
from setuptools import find_namespace_packages, setup

PACKAGES = find_namespace_packages(include=["cluster_sim", "cluster_sim.*", "hydra_plugins", "hydra_plugins.*"],
                                   exclude=["*.__pycache__"])

setup(
    packages=PACKAGES + ["cluster_sim.conf", "cluster_sim.traces"],
    package_dir={"cluster_sim.conf": "conf", "cluster_sim.traces": "traces"},
    package_data={"cluster_sim.conf": ["*.yaml", "**/*.yaml"], "cluster_sim.traces": ["default.parquet", "README.md"]},
    include_package_data=False,
)
