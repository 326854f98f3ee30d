"""Benchmark output parsers and criteria (rccl-tests)."""
