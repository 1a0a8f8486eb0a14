"""Evaluation metrics: plain functions over primitives, one result per question, aggregated later."""
