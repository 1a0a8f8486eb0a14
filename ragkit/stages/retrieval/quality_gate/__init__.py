"""The quality gate (self-RAG: judge the retrieved context, reformulate and retry): the loop
(``stage``), its params (``params``), issues found in a context (``issues``), scoring (``scoring``),
prompts (``prompts``), how each attempt widens (``attempt_scale``) and the rule-based
reformulations (``reformulation_rules``).

Public names load on first access (PEP 562), so importing one submodule stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragkit.stages.retrieval.quality_gate.params import QualityGateParams
    from ragkit.stages.retrieval.quality_gate.stage import QualityGate

_WHERE = {
    "QualityGate": "ragkit.stages.retrieval.quality_gate.stage",
    "QualityGateParams": "ragkit.stages.retrieval.quality_gate.params",
}

__all__ = ["QualityGate", "QualityGateParams"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'ragkit.stages.retrieval.quality_gate.stage' has no attribute {name!r}")
