"""The grid an experiment describes: one fully resolved GridPoint per configuration."""

from __future__ import annotations

import itertools

from pydantic import BaseModel, ConfigDict

from ragkit.experiments.config.models import ExperimentConfig
from ragkit.metrics.generation import EvaluationParams
from ragkit.registry import ComponentSpec
from ragkit.retrievers.params import STRATEGIES
from ragkit.retrievers.registry import retrievers

# The options a strategy switch carries over to the other strategies: a switch changes the
# strategy, not the documents, the filter or the semantic cache option.
SWITCH_KEEPS = ("scope", "min_similarity", "semantic_cache", "semantic_cache_store")


class GridPoint(BaseModel):
    """One configuration of the grid, fully resolved (every default filled in)."""

    model_config = ConfigDict(frozen=True)

    chunker: ComponentSpec
    embedder: ComponentSpec | None
    retriever: ComponentSpec
    top_k: int
    # Every judge named in the config, in name order, each with its mode for this point.
    judges: tuple[ComponentSpec, ...] = ()
    generator: ComponentSpec | None = None
    evaluation: EvaluationParams | None = None
    # The web search provider, on the points whose router or quality gate may search the web.
    web: ComponentSpec | None = None

    def uses_web(self) -> bool:
        """The router can route to the web, or the quality gate falls back to it."""
        gate = self.judge("quality_gate")
        return self.judge("router") is not None or (gate is not None and bool(gate.params.get("web_fallback")))

    def switches_strategy(self) -> bool:
        """Retrieval may change strategy per query: the strategy judge, the gate's switch map, or a
        late re-retrieval with another strategy (groundedness ``re_retrieve_strategy``, answer check
        ``retry_strategy``, or the design's issue map: ``issue_set: design``)."""
        gate = self.judge("quality_gate")
        late = [(self.judge("groundedness"), "re_retrieve_strategy"), (self.judge("answer_check"), "retry_strategy")]
        check = self.judge("answer_check")
        return self.judge("strategy") is not None or (gate is not None and bool(gate.params.get("switch_strategy"))) \
            or any(spec is not None and spec.params.get(option, "same") != "same" for spec, option in late) \
            or (check is not None and check.params.get("issue_set") == "design")

    def searchers(self) -> tuple[ComponentSpec, ...]:
        """The retrievers this point's runs search with, resolved: its own, then, where retrieval may
        switch strategy, each other strategy (``STRATEGIES``) at the same top_k with the options in
        ``SWITCH_KEEPS`` that its own sets (each strategy keeps its own semantic cache)."""
        if not self.switches_strategy():
            return (self.retriever,)
        own = self.retriever.params
        kept = {name: own[name] for name in SWITCH_KEEPS if own.get(name) is not None}
        return (self.retriever, *(retrievers.resolve({"type": name, "params": {"top_k": self.top_k, **kept}})
                                  for name in STRATEGIES if name != self.retriever.type))

    def active_judges(self) -> tuple[ComponentSpec, ...]:
        """The judges that do something here: a judge that is off is as if it were not configured."""
        return tuple(spec for spec in self.judges if spec.params.get("mode") != "off")

    def judge(self, name: str) -> ComponentSpec | None:
        return next((spec for spec in self.active_judges() if spec.type == name), None)


def expand_grid(config: ExperimentConfig) -> list[GridPoint]:
    """chunkers x embedders x retrievers x top_k x each judge's modes, deduplicated.

    A retriever that ignores vectors (bm25) gets no embedder, so it is not repeated once per
    embedder in the grid.
    """
    parts = config.resolved_components()
    points: dict[str, GridPoint] = {}
    judge_options = list(itertools.product(*parts["judges"].values()))
    for chunker, embedder, retriever, top_k, judges in itertools.product(
        parts["chunkers"], parts["embedders"] or [None], parts["retrievers"], config.top_k, judge_options
    ):
        retriever_cls = retrievers.info(retriever.type)
        params = retrievers.resolve({"type": retriever.type, "params": {**retriever.params, "top_k": top_k}})
        point = GridPoint(
            chunker=chunker, embedder=embedder, retriever=params, top_k=top_k, judges=tuple(judges),
            generator=parts["generator"], evaluation=config.evaluation, web=parts["web"],
        )
        # Only what a point uses is part of it: a retriever that ignores vectors keeps its
        # embedder only when retrieval may switch to a strategy that reads them, or when its
        # semantic cache compares query vectors.
        reads_vectors = retriever_cls.uses_embedder or params.params.get("semantic_cache") is not None
        # The profile judge's view is read by the strategy judge alone: where the grid turns that
        # judge off, the profile would only cost calls, counted against the strategy-off runs it is
        # compared with, so it is left out there. (Without a strategy judge in the grid at all, the
        # profile is what the experiment looks at, and it stays.)
        strategy_off = "strategy" in config.judges and point.judge("strategy") is None
        judges_used = tuple(spec for spec in point.judges if spec.type != "profile" or not strategy_off)
        point = point.model_copy(update={
            "judges": judges_used,
            "embedder": embedder if reads_vectors or point.switches_strategy() else None,
            "web": parts["web"] if point.uses_web() else None,
        })
        points.setdefault(point.model_dump_json(), point)
    return list(points.values())
