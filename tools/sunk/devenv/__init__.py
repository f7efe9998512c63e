"""Development and test runtimes: the pinned toolchain, the Slurm runtime, the control plane."""
