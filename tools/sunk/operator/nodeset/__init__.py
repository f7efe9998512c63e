"""NodeSet logic: which Nodes are feasible, how pods are named, what to create or delete."""
