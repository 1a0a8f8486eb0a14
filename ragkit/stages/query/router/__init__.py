"""The router: the stage (``stage``) and its prompts (``prompts``).

Public names load on first access (PEP 562), so importing one submodule stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragkit.stages.query.router.stage import RouterJudge

_WHERE = {
    "RouterJudge": "ragkit.stages.query.router.stage",
}

__all__ = ["RouterJudge"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'ragkit.stages.query.router.stage' has no attribute {name!r}")
