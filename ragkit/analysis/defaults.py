"""Options added after a run was written: their default, so old and new runs compare.

A results folder grows: runs written before an option existed have no column for it (or NaN),
while runs written since show its default (``plan.run_row`` writes every parameter). Both are
the same configuration, so before levels and labels are computed each missing value of an
added option is filled with the option's default, where the component or judge applies. A
component type that is not installed here (a plugin) is left as it is.

The defaults of ragkit's own components and judges are read from ``BUILT_IN_ADDED_DEFAULTS``:
asking the registries imports every component module, and with them LlamaIndex (seconds), only
to read a few defaults when a results folder is opened. ``tests/analysis/test_defaults.py``
checks that table against the registries, so an option added to a built-in fails that test until
the table lists it; any other type (a plugin) is asked through its registry.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragkit.errors import ConfigError

Default = str | bool | int | float
# kind ("chunker", "embedder", "retriever", "judge") -> type -> added option -> its default; only
# scalar defaults: an option whose default is none stays missing, as run_row writes it, and a
# list or mapping is not a level.
BUILT_IN_ADDED_DEFAULTS: dict[str, dict[str, dict[str, Default]]] = {
    "chunker": {name: {"summaries": False, **({"document_fields": "loader"} if name == "by_file_type" else {})}
                for name in ("by_file_type", "code", "document", "llm_semantic", "markdown", "recursive", "semantic",
                             "sentence", "token")},
    "embedder": {
        "huggingface": {}, "minilm": {}, "minilm-onnx": {},
        "ollama": {"backoff_s": 1.0, "max_retries": 3, "timeout_s": 60.0},
        "openai": {"backoff_s": 1.0, "max_retries": 3, "timeout_s": 60.0},
    },
    "retriever": {name: {"scope": "all", "semantic_cache_store": "run"} for name in ("bm25", "dense", "hybrid", "mmr")},
    "judge": {
        "answer_check": {"gate_score": "min", "good_retrieval_at": 0.6, "issue_set": "basic", "max_retries": 1,
                         "pass_by": "attempt", "re_retrieve_via": "retriever", "retry": False,
                         "retry_strategy": "same"},
        "chunking": {"show_file_name": False, "token_divisor": 1}, "compression": {}, "condense": {},
        "enrichment": {"parent_summary": False}, "hyde": {},
        "profile": {"on_chunks": False, "sample": "opening", "sample_chars": 800, "taxonomy": "basic"},
        "router": {"decisions": "one", "source_sees": "conversation", "summary_scope": "corpus"},
        "strategy": {},
        "generator": {"context_fit": "fixed", "context_in": "user", "history_turns": 4, "prompt_layout": "plain",
                      "quality_high": 0.8, "quality_instructions": False, "quality_low": 0.6, "show_file_name": False,
                      "turn_chars": 300},
        "groundedness": {"accept_at": 0.8, "entailment_threshold": 0.7, "max_corrections": 2,
                         "min_retrieval_quality": 0.6, "on_fail": "off", "re_retrieve_strategy": "same",
                         "regenerate_at": 0.6},
        "multi_query": {"expand_before_strategy": False, "strategy_in_prompt": False, "style": "generic"},
        "quality_gate": {"design_revision": 1, "issue_set": "basic", "pass_score": 60, "position": "before_rerank",
                         "preset": "custom",
                         "reformulation": "keywords", "reformulation_rules": "none", "verdict": "binary",
                         "web_fallback": False},
        "rerank": {"prefilter": "cross_encoder", "show_source": False},
        "retrieval": {"loop": "judge", "none_relevant": "drop_all", "show_file_name": False},
    },
}
COMPONENT_KINDS = ("chunker", "embedder", "retriever")
JUDGE_KIND = "judge"


def registry_of(kind: str) -> Any:
    """The registry of ``kind``'s types (imported on use: the registries' modules are not needed
    for the built-ins)."""
    from ragkit.chunkers import chunkers
    from ragkit.embedders.base import embedders
    from ragkit.retrievers import retrievers

    if kind == JUDGE_KIND:
        from ragkit.stages.base import STAGES

        return STAGES
    return {"chunker": chunkers, "embedder": embedders, "retriever": retrievers}[kind]


def registry_added_defaults(kind: str, name: str) -> dict[str, Default] | None:
    """What the registry says: each added option of ``name`` with a scalar default; None when the
    type is not installed here."""
    try:
        model = registry_of(kind).params_model(name)
    except (ConfigError, KeyError, ValueError):
        return None
    defaults = {}
    for option in sorted(model.added_fields):
        default = model.model_fields[option].get_default(call_default_factory=True)
        if isinstance(default, (str, bool, int, float)):
            defaults[option] = default
    return defaults


def added_defaults(kind: str, name: str) -> dict[str, Default] | None:
    known = BUILT_IN_ADDED_DEFAULTS[kind].get(name)
    return known if known is not None else registry_added_defaults(kind, name)


def with_added_defaults(runs: pd.DataFrame) -> pd.DataFrame:
    runs = runs.copy()
    for kind in COMPONENT_KINDS:
        if kind in runs.columns:
            _fill(runs, kind, kind, applies=runs[kind].notna())
    for column in [c for c in runs.columns if c.startswith("judge.") and c.count(".") == 1]:
        # Only a judge that is on has parameters in effect (run_row writes none for off).
        applies = runs[column].notna() & (runs[column] != "off")
        _fill(runs, column, JUDGE_KIND, applies=applies, type_of=lambda _value, name=column[6:]: name)
    return runs


def _fill(runs: pd.DataFrame, column_prefix: str, kind: str, applies: pd.Series, type_of: Any = None) -> None:
    for value, index in runs[applies].groupby(column_prefix, sort=False).groups.items():
        defaults = added_defaults(kind, type_of(value) if type_of is not None else str(value))
        for option, default in (defaults or {}).items():
            column = f"{column_prefix}.{option}"
            if column not in runs.columns:
                runs[column] = pd.Series([pd.NA] * len(runs), index=runs.index, dtype="object")
            missing = index[runs.loc[index, column].isna().to_numpy()]
            if len(missing):
                runs[column] = runs[column].astype("object")
                runs.loc[missing, column] = default
