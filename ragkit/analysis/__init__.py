"""Comparing runs: the one place every number a report, summary, export or dashboard page shows
is computed.

- ``loading``: a results folder's tables (``Results``), read when a view needs them.
- ``statistics``: cluster-robust means, intervals and p-values over the resampling unit; Holm.
- ``pairing``: factors, each run's level of them, fair single-factor pairs.
- ``comparison``: the engine: paired differences at a common depth with failures counted, and
  each factor's effect against its reference level (fixed before the data).
- ``means``, ``latency``, ``failures``, ``judges``: per-run means, costs, failure accounting and
  judge on/off effects.
- ``summary``, ``report``, ``export``, ``charts``: the outputs.
"""

from ragkit.analysis.comparison import Comparer, compare, with_adjusted
from ragkit.analysis.loading import Results, load_results
from ragkit.analysis.means import available_metrics, curve, metric_means, metric_table

__all__ = ["Comparer", "Results", "available_metrics", "compare", "curve", "load_results", "metric_means",
           "metric_table", "with_adjusted"]
