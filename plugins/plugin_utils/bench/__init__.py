"""Scale-out advice from benchmark results."""
