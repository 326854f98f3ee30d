"""Acceptance on the controller: isolating the hosts that make a multi-node collective fail its criterion."""
