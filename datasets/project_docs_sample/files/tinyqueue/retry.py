"""Retry delays: exponential backoff with full jitter."""

from __future__ import annotations

import random


def next_delay(attempt: int, base_delay: float = 1.0, max_delay: float = 300.0) -> float:
    """Seconds to wait before retrying after ``attempt`` failed attempts.

    The delay doubles with each attempt, is capped at ``max_delay``, and is drawn uniformly
    between zero and that value (full jitter), so workers that failed together do not retry
    together.
    """
    ceiling = min(max_delay, base_delay * 2 ** (attempt - 1))
    return random.uniform(0.0, ceiling)
