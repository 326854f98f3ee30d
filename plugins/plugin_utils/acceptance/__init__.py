"""Acceptance on the controller: a node's verdicts and the cluster's view of them, bad-node isolation."""
