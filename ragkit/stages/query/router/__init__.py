"""The router: the stage (``stage``) and its prompts (``prompts``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

from ragkit.lazy_exports import lazy_exports

_WHERE = {
    "RouterJudge": "ragkit.stages.query.router.stage",
}

__all__ = ["RouterJudge"]

__getattr__ = lazy_exports(__name__, _WHERE)
