"""Cross-node comparisons."""
