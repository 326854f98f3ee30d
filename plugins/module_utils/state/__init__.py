"""What topotune manages on a node: the manifest and drift, kernel runtime settings, CPU frequency, the node-local exporter."""
