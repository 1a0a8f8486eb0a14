"""The quality gate (self-RAG: judge the retrieved context, reformulate and retry): the loop
(``stage``), its params (``params``), issues found in a context (``issues``), scoring (``scoring``),
prompts (``prompts``), how each attempt widens (``attempt_scale``) and the rule-based
reformulations (``reformulation_rules``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

from ragkit.lazy_exports import lazy_exports

_WHERE = {
    "QualityGate": "ragkit.stages.retrieval.quality_gate.stage",
    "QualityGateParams": "ragkit.stages.retrieval.quality_gate.params",
}

__all__ = ["QualityGate", "QualityGateParams"]

__getattr__ = lazy_exports(__name__, _WHERE)
