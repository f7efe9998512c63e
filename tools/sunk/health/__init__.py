"""Node health: the check runner slurmd starts (HealthCheckProgram, prolog, epilog) and the drain
reasons it shares with the Syncer. Standard library only: the slurmd image runs it as is."""
