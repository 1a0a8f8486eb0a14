"""Each built-in stage's info class (``judges.info``): the stage class subclasses it, so what a
config is validated and planned from is what runs; reading every info imports no LlamaIndex."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.stages.base import BUILT_IN_STAGE_INFOS, BUILT_IN_STAGES, STAGES, Stage, StageInfo

REPO = Path(__file__).resolve().parents[2]
DECLARATIONS = ("name", "kind", "version", "Params", "modes", "role", "inputs", "outputs", "order", "needs")


@pytest.mark.unit
def test_every_built_in_stage_names_an_info_class():
    assert set(BUILT_IN_STAGE_INFOS) == set(BUILT_IN_STAGES)


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(BUILT_IN_STAGES))
def test_a_stage_class_subclasses_its_info_and_declares_nothing_twice(name):
    info, cls = STAGES.info(name), STAGES.get(name)
    assert info is not cls and issubclass(cls, info) and issubclass(info, StageInfo)
    assert not issubclass(info, Stage)  # a declaration, not a runnable stage
    assert info.name == name
    for attribute in DECLARATIONS:
        assert getattr(cls, attribute) == getattr(info, attribute), attribute
        # Declared in the info (or its bases), not again in the stage class or the stage's own bases.
        assert all(attribute not in vars(base) for base in cls.__mro__ if not issubclass(info, base)), attribute
    for rule in ("calls_llm", "_final_depth"):
        assert all(rule not in vars(base) for base in cls.__mro__ if not issubclass(info, base)), rule


@pytest.mark.unit
def test_a_stage_registered_at_run_time_is_its_own_info():
    class Probe(Stage):
        name = "probe_stage"
        role = "context"
        inputs = ("query", "nodes")
        outputs = ("nodes",)

    with STAGES.registered("probe_stage", Probe):
        assert STAGES.info("probe_stage") is Probe


@pytest.mark.unit
def test_reading_every_built_in_stage_info_imports_no_llama_index():
    code = ("import sys\nfrom ragkit.stages.base import BUILT_IN_STAGES, STAGES\n"
            "for name in BUILT_IN_STAGES:\n    STAGES.info(name).Params()\n"
            "print(sorted(m for m in ('llama_index', 'torch', 'lancedb', 'sentence_transformers', 'llama_cpp') "
            "if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    child = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == "[]"
