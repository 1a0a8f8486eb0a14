"""Experiments: config (YAML, grid) -> plan (content-keyed steps) -> executor (runs what is missing)."""
