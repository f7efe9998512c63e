"""The Syncer: Slurm node state and Kubernetes Pod/Node state kept in agreement, one loop per
SlurmCluster, run by the operator's leader (see ``loop``)."""
