"""The SUNK Pod Scheduler: Kubernetes Pods placed through Slurm placeholder jobs."""
