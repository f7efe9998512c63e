"""SlurmCluster: the control-plane objects (pure builders) and their readiness."""
