"""Open SUNK: Slurm on Kubernetes.

Sub-packages, one concern each:
  models     typed models of chart values and CRD specs (the single source of truth)
  slurmconf  pure renderers of Slurm configuration files
  operator   the kopf operator
  cli        the sunkctl command line
  resources  where the charts and schemas are (environment, package data, checkout)
  devenv     development/test runtimes: toolchain, Slurm runtime, control plane (tests and
             `make` only; runtime code never imports it and the wheel does not carry it)
"""

__version__ = "0.1.0"
