"""A dashboard server's first session imports what its page needs: the Compare page's modules
(the entry point's sidebar, the cache layer, the pickers, the sections) load no LlamaIndex and no
experiment runner. They are imported when a page first runs, so every module they pull in is
waited for by the first user of a freshly started server (LlamaIndex and the runner's configs
were about half of that session's imports). Checked in a fresh child interpreter; nothing is timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
NOT_ON_THE_COMPARE_PAGE = ("llama_index.core", "ragkit.app.jobs", "ragkit.experiments.runner", "ragkit.chunkers",
                           "torch", "lancedb", "onnxruntime")
CHILD = """
import json, sys
import dashboard.auth, dashboard.state, dashboard.selection, dashboard.compare_sections
print(json.dumps(sorted(name for name in json.loads(sys.argv[1]) if name in sys.modules)))
"""


def test_the_compare_pages_modules_import_no_llamaindex_and_no_runner():
    found = subprocess.run([sys.executable, "-c", CHILD, json.dumps(NOT_ON_THE_COMPARE_PAGE)], cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, check=True)
    assert json.loads(found.stdout.strip().splitlines()[-1]) == []
