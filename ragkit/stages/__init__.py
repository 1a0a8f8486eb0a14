"""LLM judges inside the pipeline: each a toggleable component that records every decision."""
