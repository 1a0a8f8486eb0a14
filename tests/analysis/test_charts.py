"""The forest chart draws its line at no difference in every panel, on that panel's own axes."""

from __future__ import annotations

import pandas as pd
import pytest

from ragkit.analysis.charts import forest_chart

pytestmark = pytest.mark.unit


def test_every_forest_panel_has_a_dotted_line_at_no_difference_on_its_axes():
    metrics = ["recall@5", "mrr", "ndcg@10"]
    effects = pd.DataFrame([
        {"kind": "factor", "factor": "chunker", "level_a": level, "level_b": "token", "run_a": None, "run_b": None,
         "metric": metric, "metric_compared": metric, "diff": 0.1, "ci_low": -0.05, "ci_high": 0.25, "p": 0.2,
         "p_adj": 0.4, "n": 30}
        for metric in metrics for level in ("sentence", "semantic")])
    figure = forest_chart(effects, pd.DataFrame({"run_id": ["r1"], "label": ["r1"]}))
    axes = [(trace.xaxis, trace.yaxis) for trace in figure.data]
    assert axes == [("x", "y"), ("x2", "y2"), ("x3", "y3")]  # one panel per metric
    lines = [(shape.xref, shape.yref, shape.x0, shape.x1, shape.y0, shape.y1, shape.line.dash)
             for shape in figure.layout.shapes]
    assert lines == [(x, f"{y} domain", 0, 0, 0, 1, "dot") for x, y in axes]
    assert figure.layout.xaxis2.range == (-0.2875, 0.2875)  # centred on 0: 1.15 x the widest reach
