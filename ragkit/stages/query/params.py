"""Each built-in query stage's parameters and declarations, without LlamaIndex.

The query transforms subclass LlamaIndex's BaseRetriever, and every stage module reads chunks;
validating a config and planning a grid read only a stage's ``Params``, modes, role and plan-time
rules, so these live here, in an *info* class the stage class subclasses, readable through
``judges.info(name)`` without importing the stage (``ragkit.registry``, ``ragkit.stages.base``).
"""

from __future__ import annotations

from typing import ClassVar, Literal, cast

from pydantic import Field, field_validator, model_validator

from ragkit.corpus.summary import SummaryMethod
from ragkit.stages.base import StageInfo, StageParams


class CondenseParams(StageParams):
    history_turns: int = Field(default=4, ge=1, le=50, description="Turns of the conversation shown, latest last.")
    turn_chars: int = Field(default=300, ge=20, le=4000, description="Characters of each turn shown.")
    max_tokens: int = Field(default=96, ge=16, le=2048, description="llm: most tokens in one reply.")


class ProfileParams(StageParams):
    documents: Literal["mode", "heuristic"] = Field(
        default="mode",
        description="How each document's profile is written, once per corpus: mode (as the query is: by rule, "
                    "or by the model in llm mode, one call per document) or heuristic (always by rule).",
    )
    technical_density: float = Field(
        default=0.3, ge=0.0, le=1.0,
        description="The corpus counts as technical at this mean technical density (0-1) or more.",
    )
    simple_words: int = Field(default=3, ge=1, le=50, description="heuristic: at most this many content words "
                                                                   "and no joint -> simple.")
    complex_words: int = Field(default=8, ge=2, le=100, description="heuristic: this many content words or "
                                                                    "more -> complex.")
    max_tokens: int = Field(default=64, ge=16, le=2048, description="llm: most tokens in one reply.")
    taxonomy: Literal["basic", "design"] = Field(
        default="basic",
        description="basic: document types academic, code, table, documentation, general and query intents "
        "factual, comparison, procedural, exploratory; design: the agentic design's 29 document types and its "
        "intents factual, conceptual, comparative, procedural (its query-analysis rules in heuristic mode).")
    sample: Literal["opening", "stratified"] = Field(
        default="opening",
        description="llm documents: what of each document the model reads: its opening, or a stratified sample "
        "(the design's: 45% of sample_chars from the first 30% of the document, 22% from the last 20%, the rest "
        "from the middle).")
    sample_chars: int = Field(
        default=800, ge=100, le=40000,
        description="llm documents: characters of each document shown (the design's: 20,000, about 5,000 tokens).")

    on_chunks: bool = Field(
        default=False,
        description="Put each document's profile (doc_type, technical_density, domain_tags) on the metadata of "
        "every chunk retrieved from it, for the stages after retrieval to read (the agentic design's); chunk "
        "sets and indexes are unchanged.")

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {"taxonomy", "sample", "sample_chars",
                                                                         "on_chunks"}

    @model_validator(mode="after")
    def _words_in_order(self) -> ProfileParams:
        if self.simple_words >= self.complex_words:
            raise ValueError(f"simple_words ({self.simple_words}) must be below complex_words ({self.complex_words})")
        return self


class RouterParams(StageParams):
    summary: SummaryMethod = Field(
        default="heuristic",
        description="How the corpus summary the router reads is written: heuristic (titles and distinctive "
                    "words) or llm (the model summarises titles and opening lines). Written once per corpus.",
    )
    yes_share: float = Field(
        default=0.5, gt=0.0, le=1.0,
        description="heuristic: at least this share of the question's content words in the corpus vocabulary "
                    "-> documents, relevance yes.",
    )
    maybe_share: float = Field(
        default=0.2, gt=0.0, le=1.0,
        description="heuristic: at least this share (and below yes_share) -> documents, relevance maybe; "
                    "below it -> web, relevance no.",
    )
    summary_chars: int = Field(
        default=1200, ge=100, le=20000, description="llm: characters of the corpus summary shown to the model."
    )
    history_turns: int = Field(
        default=4, ge=0, le=50, description="llm: most recent conversation turns shown (0: none)."
    )
    turn_chars: int = Field(
        default=300, ge=20, le=4000, description="llm: characters of each conversation turn shown."
    )
    max_tokens: int = Field(default=96, ge=16, le=2048, description="llm: most tokens in one reply.")
    decisions: Literal["one", "two"] = Field(
        default="one",
        description="one: route and relevance in one decision; two: relevance first, then (only if the "
                    "documents do not cover the question) conversational or web, each decision recorded.",
    )

    source_sees: Literal["conversation", "question"] = Field(
        default="conversation",
        description="decisions two: the source decision (conversational or web) is shown the conversation and "
        "the message, or the message alone (the dynamic-documents design's).")

    summary_scope: Literal["corpus", "document"] = Field(
        default="corpus",
        description="What the router's summary describes: corpus (the whole collection) or document (the "
        "document(s) the question names, its `document` field, as scope named_doc; the dynamic-documents "
        "design's). A question that names none is routed on the corpus summary, recorded.")

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {"decisions", "source_sees",
                                                                         "summary_scope"}

    @model_validator(mode="after")
    def _shares_in_order(self) -> RouterParams:
        if self.maybe_share > self.yes_share:
            raise ValueError(f"maybe_share ({self.maybe_share}) must not exceed yes_share ({self.yes_share})")
        return self


Strategy = Literal["dense", "bm25", "hybrid"]
ALL_STRATEGIES: tuple[Strategy, ...] = ("dense", "bm25", "hybrid")


class StrategyParams(StageParams):
    strategies: list[Strategy] = Field(
        default_factory=lambda: list(ALL_STRATEGIES), min_length=1,
        description="The strategies the judge may pick from.",
    )
    max_tokens: int = Field(default=64, ge=16, le=2048, description="llm: most tokens in one reply.")

    @field_validator("strategies")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"strategies must not repeat, got {value}")
        return value


# The three rewrites of the typed style (``style: typed``), in the order they are asked for.
VARIANT_TYPES = ("technical", "simple", "aspect")


class MultiQueryParams(StageParams):
    num_queries: int = Field(default=3, ge=1, le=5, description="Rewrites of the question the LLM writes.")
    include_original: bool = Field(default=True, description="Also retrieve with the question itself.")
    rrf_k: int = Field(default=60, ge=1, le=1000, description="RRF constant k in 1 / (k + rank).")
    top_k: int = Field(default=10, ge=1, le=1000, description="Chunks returned after fusion.")
    max_tokens: int = Field(default=120, ge=16, le=2048, description="Most tokens in one reply.")
    style: Literal["generic", "typed"] = Field(
        default="generic",
        description="generic: num_queries rewrites; typed: three variants, technical, simple and "
        "aspect-focused (num_queries is then ignored).",
    )
    strategy_in_prompt: bool = Field(
        default=False,
        description="Name the retrieval strategy in use (when the strategy judge or the quality gate chose one) "
        "in the prompt, so the rewrites suit it and a gate retry with another strategy regenerates them.",
    )

    expand_before_strategy: bool = Field(
        default=False,
        description="With strategy_in_prompt: the first expansions of a question are made before the strategy "
        "judge runs (a step of their own) and without the strategy, as the agentic design expands the query before "
        "it chooses the strategy, then searched with the strategy chosen; only a strategy switch after the first "
        "search (a gate's, a correction's) names the new strategy and regenerates them.",
    )

    added_fields: ClassVar[frozenset[str]] = StageParams.added_fields | {"style", "strategy_in_prompt",
                                                                         "expand_before_strategy"}

    @model_validator(mode="after")
    def _before_needs_the_strategy(self) -> MultiQueryParams:
        if self.expand_before_strategy and not self.strategy_in_prompt:
            raise ValueError("expand_before_strategy names the strategy only after a switch: set strategy_in_prompt")
        return self


class HyDEParams(StageParams):
    combine: Literal["passage", "concatenate", "rrf"] = Field(
        default="concatenate",
        description="passage: retrieve with the hypothetical passage alone; concatenate: with the question "
        "followed by the passage; rrf: retrieve with each and fuse the two rankings.",
    )
    passage_chars: int = Field(default=500, ge=20, le=4000, description="Characters of the passage used.")
    rrf_k: int = Field(default=60, ge=1, le=1000, description="RRF constant k (combine: rrf).")
    top_k: int = Field(default=10, ge=1, le=1000, description="Chunks returned.")
    max_tokens: int = Field(default=120, ge=16, le=2048, description="Most tokens in one reply.")


class CondenseJudgeInfo(StageInfo):
    """What ``CondenseJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "condense"
    role: ClassVar[str] = "follow_up"
    Params: ClassVar[type[CondenseParams]] = CondenseParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm")


class ProfileJudgeInfo(StageInfo):
    """What ``ProfileJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "profile"
    role: ClassVar[str] = "profile"
    needs: ClassVar[tuple[str, ...]] = ("document_profiles",)
    Params: ClassVar[type[ProfileParams]] = ProfileParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm")


class RouterJudgeInfo(StageInfo):
    """What ``RouterJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "router"
    role: ClassVar[str] = "route"
    # The named documents are an optional read of the route role: declared here, so the pipeline
    # gives them to this router and not to a plugin written for ``route(question, history, trace)``.
    inputs: ClassVar[tuple[str, ...]] = ("question", "history", "documents")
    needs: ClassVar[tuple[str, ...]] = ("summary", "document_summaries")
    Params: ClassVar[type[RouterParams]] = RouterParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm")


class StrategyJudgeInfo(StageInfo):
    """What ``StrategyJudge`` declares; it subclasses this."""

    name: ClassVar[str] = "strategy"
    role: ClassVar[str] = "strategy"
    Params: ClassVar[type[StrategyParams]] = StrategyParams
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic", "llm")


class TransformInfo(StageInfo):
    """What every query transform declares: it rewrites the query and retrieves with the rewrites."""

    role: ClassVar[str] = "transform"
    needs: ClassVar[tuple[str, ...]] = ("retriever",)
    modes: ClassVar[tuple[str, ...]] = ("off", "llm")


class MultiQueryRetrieverInfo(TransformInfo):
    """What ``MultiQueryRetriever`` declares; it subclasses this."""

    name: ClassVar[str] = "multi_query"
    order: ClassVar[int] = 20
    Params: ClassVar[type[MultiQueryParams]] = MultiQueryParams

    @classmethod
    def _final_depth(cls, params: StageParams, depth: int, top_k: int) -> int:
        own = cast(MultiQueryParams, params)  # final_depth checked it is cls.Params
        variants = len(VARIANT_TYPES) if own.style == "typed" else own.num_queries
        queries = variants + int(own.include_original)
        return min(own.top_k, queries * depth)


class HyDERetrieverInfo(TransformInfo):
    """What ``HyDERetriever`` declares; it subclasses this."""

    name: ClassVar[str] = "hyde"
    order: ClassVar[int] = 10
    Params: ClassVar[type[HyDEParams]] = HyDEParams

    @classmethod
    def _final_depth(cls, params: StageParams, depth: int, top_k: int) -> int:
        own = cast(HyDEParams, params)  # final_depth checked it is cls.Params
        fused = 2 if own.combine == "rrf" else 1  # rrf fuses the question's and the passage's rankings
        return min(own.top_k, fused * depth)
