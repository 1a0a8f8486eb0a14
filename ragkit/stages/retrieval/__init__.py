"""Retrieval stages: the quality gate (the loop, its params, scoring and prompts) and the Retrieval Judge."""
