"""Tables as JSON rows at full precision: every number as Python writes it (shortest exact form),
never pandas' ``to_json``, which rounds floats to 10 digits (a p below 5e-11 became 0.0).

Every JSON output of ragkit.analysis (report, best, failures, slices, the regression gate) goes
through ``json_records``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _plain(value: object) -> object:
    """A cell as JSON writes it at full precision: NaN and NA null, numpy scalars plain numbers."""
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if np.isnan(value) else float(value)
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, (np.ndarray, list, tuple)):
        return [_plain(item) for item in value]
    return value


def json_records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts, every float as Python writes it (shortest exact form, no rounding)."""
    return [{str(k): _plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]
