"""`sunkctl upgrade-check`: what the next `helm upgrade` of a slurm release changes in a live
cluster, which daemons it restarts and which slurmd Pods it drains (:mod:`.plan`), read from
the cluster with kubectl (:mod:`.live`)."""
