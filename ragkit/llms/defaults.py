"""Which backend to use when the config does not say, and which model plays which role."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragkit.registry import ComponentSpec, as_spec
from ragkit.settings import RagkitSettings, get_settings


def ollama_answers(base_url: str, timeout_s: float = 0.5) -> bool:
    """True if an Ollama server answers ``/api/version`` within ``timeout_s``."""
    import httpx

    try:
        response = httpx.get(base_url.rstrip("/") + "/api/version", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def resolve_default_backend(settings: RagkitSettings | None = None, *, probe_timeout_s: float = 0.5) -> ComponentSpec:
    """``ollama`` when a server answers at the configured URL, else the embedded ``local`` model."""
    settings = settings or get_settings()
    url, model = settings.ollama_url, settings.ollama_model
    if ollama_answers(url, probe_timeout_s):
        return ComponentSpec(type="ollama", params={"base_url": url, "model": model})
    return ComponentSpec(type="local")


class LLMRoles(BaseModel):
    """Which LLM each role uses; a role without its own spec uses ``default``.

    Judges can run on a small fast model while the generator uses a stronger one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: ComponentSpec | None = Field(
        default=None, description="Spec for every role not listed; None: resolve_default_backend()."
    )
    roles: dict[str, ComponentSpec] = Field(
        default_factory=dict, description="Role name (e.g. 'generator', 'retrieval_judge') -> LLM spec."
    )

    @classmethod
    def from_config(cls, value: dict[str, Any]) -> LLMRoles:
        """Accepts the short forms a user writes in YAML: a type name or ``{type, params}``."""
        default = value.get("default")
        roles = {role: as_spec(spec) for role, spec in (value.get("roles") or {}).items()}
        return cls(default=as_spec(default) if default is not None else None, roles=roles)

    def spec_for(self, role: str, settings: Any = None) -> ComponentSpec:
        if role in self.roles:
            return self.roles[role]
        if self.default is not None:
            return self.default
        return resolve_default_backend(settings)
