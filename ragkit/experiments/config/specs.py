"""Component specs as a user writes them: shorthands (`- bm25`, `embedders: [auto]`) and
resolution through a registry with the config field named in the error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from ragkit.errors import ConfigError
from ragkit.quoting import quoted
from ragkit.registry import ComponentSpec


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


def spec_list(value: Any) -> Any:
    """Accept the shorthand `- bm25` for `- {type: bm25}`; anything else that is not a list is
    left for pydantic to reject with the field's name."""
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list):
        return value
    return [{"type": item} if isinstance(item, str) else item for item in value]


# `embedders: [auto]` (or {type: auto, params: {ollama_model: ...}}): an Ollama embedding model
# when a server answers at the configured URL, else the bundled MiniLM; decided when the config
# is loaded, so the run ids and the results name the embedder that was really used.
AUTO_EMBEDDER = "auto"
AUTO_OLLAMA_MODEL = "nomic-embed-text"


def resolve_auto_embedder(spec: dict[str, Any]) -> dict[str, Any]:
    from ragkit.llms.defaults import ollama_answers  # a probe of at most half a second
    from ragkit.settings import get_settings

    params = dict(spec.get("params") or {})
    model = params.pop("ollama_model", AUTO_OLLAMA_MODEL)
    if params or set(spec) - {"type", "params"}:
        extra = sorted(set(params) | (set(spec) - {"type", "params"}))
        raise ValueError(f"embedder 'auto' takes only params.ollama_model, got {quoted(extra)}")
    url = get_settings().ollama_url
    if ollama_answers(url):
        return {"type": "ollama", "params": {"model_name": model, "base_url": url}}
    return {"type": "minilm"}


def embedder_spec_list(value: Any) -> Any:
    """``spec_list`` with each `auto` embedder resolved to the one this machine will use."""
    value = spec_list(value)
    if not isinstance(value, list):
        return value
    return [resolve_auto_embedder(item) if isinstance(item, dict) and item.get("type") == AUTO_EMBEDDER else item
            for item in value]


def resolve_at(field: str, resolve: Callable[[Any], ComponentSpec], spec: Any) -> ComponentSpec:
    """``resolve(spec)``, a ConfigError naming the config field the spec was written in."""
    try:
        return resolve(spec)
    except ConfigError as error:
        raise ConfigError(f"{field}: {error}") from None
