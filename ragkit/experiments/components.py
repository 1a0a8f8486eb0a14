"""The heavy components one process shares across a plan's runs: embedders and LLM clients, each
built once per spec (a loaded model, a client's cache and usage counters) and reused by every
run and role that names it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragkit.caches.keys import CacheKeyLog
from ragkit.embedders.base import embedders
from ragkit.errors import BackendUnavailable
from ragkit.experiments.plan import RunStep, component_key
from ragkit.experiments.throughput import record_throughput
from ragkit.llms.base import DIGEST_PREFIX, UNKNOWN_DIGEST
from ragkit.llms.base import llms as llm_registry
from ragkit.llms.calls import LLMClient
from ragkit.registry import ComponentSpec

# The embedder whose vectors must mean the same in every run, whatever embedder the run
# retrieves with: semantic chunk breakpoints, answer relevancy, embedding groundedness.
REFERENCE_EMBEDDER = "minilm"


class SharedComponents:
    """Embedders and LLM clients by component key, built on first use."""

    def __init__(self, data_dir: Path, key_log: CacheKeyLog | None = None) -> None:
        self.data_dir = data_dir
        self.key_log = key_log  # the LLM cache keys every client uses (see ragkit.caches.keys)
        self._embedders: dict[str, Any] = {}
        self._llm_clients: dict[str, LLMClient] = {}

    def llm_client(self, spec: ComponentSpec) -> LLMClient:
        """One client (and one loaded model) per backend spec, shared by every run and role."""
        key = component_key(llm_registry, spec)
        if key not in self._llm_clients:
            self._llm_clients[key] = LLMClient.for_data_dir(llm_registry.build(spec), self.data_dir,
                                                             self.key_log)
        return self._llm_clients[key]

    def embedder(self, spec: ComponentSpec) -> Any:
        key = component_key(embedders, spec)
        if key not in self._embedders:
            self._embedders[key] = embedders.build(spec)
        return self._embedders[key]

    def embedders(self) -> list[Any]:
        """The embedders built so far."""
        return list(self._embedders.values())

    def reference_embed_model(self) -> Any:
        """The bundled MiniLM's LlamaIndex embedding model (see REFERENCE_EMBEDDER)."""
        return self.embedder(embedders.resolve(REFERENCE_EMBEDDER)).embed_model()

    def llm_digests(self, run: RunStep) -> dict[str, str]:
        """``llm_digest.<role>`` per role: the digest of the model answering it, "unknown" where the
        backend cannot tell (OpenAI-compatible) or its server is down (the run then stops on it).
        Beside the run id, not in it: the run id names the configuration, the digest what a tag
        pointed at when the run was (last) executed, which the regression gate compares."""
        digests = {}
        for role, spec in sorted(run.llms.items()):
            try:
                digest = self.llm_client(spec).backend.model_digest()
            except BackendUnavailable:
                digest = None
            digests[f"{DIGEST_PREFIX}{role}"] = digest or UNKNOWN_DIGEST
        return digests

    def raise_outage(self) -> None:
        """Raise the outage any client met during the question just answered: ragas catches every
        exception, so an unreachable backend it met would otherwise be a row of NaNs."""
        outages = [outage for client in self._llm_clients.values() if (outage := client.take_outage())]
        if outages:
            raise outages[0]

    def record_llm_throughput(self) -> None:
        """Each client's backend calls and their seconds since the last record (throughput.json),
        for the dry run's time estimates."""
        for key, client in self._llm_clients.items():
            calls, seconds = client.take_backend_time()
            label = f"{client.backend.name}:{client.backend.model_name}"
            record_throughput(self.data_dir, "llms", key, label, calls, seconds)
