"""The router: the stage (``stage``) and its prompts (``prompts``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "RouterJudge": "ragkit.stages.query.router.stage",
}

__all__ = ["RouterJudge"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
