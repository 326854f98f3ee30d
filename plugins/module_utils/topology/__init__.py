"""Reading a node: GPU topology model and its readers (KFD, amd-smi, rocm-smi), CPU topology, GPU identity, node snapshots."""
