"""Acceptance on the controller: a node's verdicts against AMD's criteria, the cluster's view of them, and
bad-node isolation in multi-node collectives."""
