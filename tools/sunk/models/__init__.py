"""Typed models: the single place every values key and CRD field is declared.

``values``  the `slurm` and `sunk` charts' values
``crds``    the SlurmCluster and NodeSet custom resources (`sunk.coreweave.com/v1alpha1`)
``merge``   how a node group is resolved from chart defaults and named definitions
``quantity`` Kubernetes resource quantities
"""
