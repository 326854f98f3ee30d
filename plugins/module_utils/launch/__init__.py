"""GPU groups, bindings, the launch files and gres.conf."""
