"""The SUNK operator: SlurmCluster and NodeSet reconciliation.

Handlers are small; the logic lives in pure builders and planners that turn the desired spec
and the observed cluster into Kubernetes objects (unit-tested without a cluster).
"""
