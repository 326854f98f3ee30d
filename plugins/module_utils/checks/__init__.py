"""Judging a node: platform, PCIe/RDMA and GPU health checks, pinned expectations, NFD labels."""
