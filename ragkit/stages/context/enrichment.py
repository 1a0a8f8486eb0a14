"""Context enrichment: each final chunk brings its neighbours and the best chunks of its section.

A hit cut from the middle of a passage often lacks the sentence before or after it. After
reranking, each hit is replaced by the chunks of its document within ``window`` of it (in
document order, the hit among them), followed by up to ``max_related`` other chunks of the same
section (``breadcrumb``) whose similarity to the query exceeds ``related_min_score``. A chunk
appears once, where it first comes. Added chunks carry the hit's score (so a threshold or a
later cut treats them like their hit) and ``enriched_from`` in their metadata.

It is a judge with modes off / heuristic (no LLM), so the grid pairs the context before (off)
with the context after (heuristic) over the same retrieval, and every ranking metric compares
them; ``recall@{n}tok`` compares them at equal context size.

With ``parent_summary`` on, every chunk of the enriched context is shown with its document's
summary line: ``doc_summary`` (one LLM summary per document, written by a chunker with summaries on,
e.g. ``by_file_type``), else the document's own ``description`` (front matter, or its first paragraph
of prose). The line goes into the chunk's ``parent_summary`` metadata, which the answer prompt
shows before the chunk's text (``stages.prompts.with_parent_summary``); the text itself stays the
exact slice of its document. Off (the default) changes nothing (an added field: the run-id rule at
``ComponentParams.added_fields``).
"""

from __future__ import annotations

import json
import time
from typing import Any, cast

import numpy as np
from llama_index.core.schema import NodeWithScore

from ragkit.artefacts.index import ChunkIndex, Hit, doc_filter
from ragkit.retrievers.base import hit_to_node
from ragkit.stages.base import JudgementLog, Stage
from ragkit.stages.context.params import EnrichmentJudgeInfo, EnrichmentParams
from ragkit.stages.prompts import PARENT_SUMMARY

# Where a chunk's parent summary line comes from, best first.
PARENT_SUMMARY_SOURCES = ("doc_summary", "description")


class EnrichmentJudge(EnrichmentJudgeInfo, Stage):
    params: EnrichmentParams

    def __init__(self, params: EnrichmentParams, llm: Any = None, index: ChunkIndex | None = None,
                 embedder: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)
        if self.enabled and index is None:
            raise ValueError("judge 'enrichment' needs the run's index")
        self.index = index
        self.embedder = embedder

    def process(self, query: str, nodes: list[NodeWithScore], trace: JudgementLog) -> list[NodeWithScore]:
        """The context role's call (``enrich``)."""
        return self.enrich(query, nodes, trace)

    def enrich(self, query: str, nodes: list[NodeWithScore], trace: JudgementLog) -> list[NodeWithScore]:
        if not self.enabled or not nodes:
            return list(nodes)
        started = time.perf_counter()
        index = cast(ChunkIndex, self.index)  # __init__ made sure an enabled judge has one
        doc_ids = sorted({str(node.node.metadata["doc_id"]) for node in nodes if "doc_id" in node.node.metadata})
        related_note = self._related_problem(index)
        chunks = index.chunks(doc_filter(doc_ids), with_vectors=related_note is None) if doc_ids else []
        by_doc: dict[str, dict[int, Hit]] = {}
        for chunk in chunks:
            by_doc.setdefault(str(chunk.row["doc_id"]), {})[int(chunk.row["chunk_index"])] = chunk
        query_vector = self.embedder.embed_query(query) if related_note is None else None

        result: list[NodeWithScore] = []
        seen: set[str] = set()
        # A neighbour that is itself a hit goes in as that hit (its own score, not "added").
        originals = {node.node.node_id: node for node in nodes}
        added: dict[str, list[str]] = {}

        def emit(node: NodeWithScore, source: str | None) -> None:
            node_id = node.node.node_id
            if node_id in seen:
                return
            seen.add(node_id)
            result.append(node)
            if source is not None:
                added.setdefault(source, []).append(node_id)

        for hit in nodes:
            metadata = hit.node.metadata
            document = by_doc.get(str(metadata.get("doc_id")), {})
            position = metadata.get("chunk_index")
            if position is None or not document:  # not an index chunk (a web result): kept as it is
                emit(hit, None)
                continue
            position = int(position)
            for offset in range(-self.params.window, self.params.window + 1):
                if offset == 0:
                    emit(hit, None)
                elif (neighbour := document.get(position + offset)) is not None:
                    original = originals.get(str(neighbour.row["chunk_id"]))
                    if original is not None:
                        emit(original, None)
                    else:
                        emit(self._added(neighbour, hit), hit.node.node_id)
            if query_vector is not None:
                for chunk in self._related(hit, document, position, query_vector, seen, originals):
                    emit(self._added(chunk, hit), hit.node.node_id)

        before = sum(len(node.node.get_content()) for node in nodes)
        after = sum(len(node.node.get_content()) for node in result)
        decision: dict[str, Any] = {"hits": [node.node.node_id for node in nodes], "added": added,
                                    "chunks_before": len(nodes), "chunks_after": len(result),
                                    "chars_before": before, "chars_after": after}
        if related_note is not None and self.params.max_related:
            decision["related_skipped"] = related_note
        if self.params.parent_summary:
            result, decision["parent_summary"] = with_parent_summaries(result)
        trace.add(self.judgement(f"{query} | {len(nodes)} chunks", decision, started=started))
        return result

    def _related_problem(self, index: ChunkIndex) -> str | None:
        """Why same-section chunks cannot be scored, or None when they can."""
        if not self.params.max_related:
            return "max_related is 0"
        if not index.has_vectors or self.embedder is None:
            return "the index holds no vectors (a bm25-only run): same-section chunks are not scored"
        return None

    def _related(self, hit: NodeWithScore, document: dict[int, Hit], position: int, query_vector: np.ndarray,
                 seen: set[str], originals: dict[str, NodeWithScore]) -> list[Hit]:
        """The best ``max_related`` chunks of the hit's section above the score, outside its window."""
        section = hit.node.metadata.get("breadcrumb")
        if not section:
            return []
        scored = []
        for chunk_index, chunk in document.items():
            chunk_id = str(chunk.row["chunk_id"])
            if abs(chunk_index - position) <= self.params.window or chunk_id in seen or chunk_id in originals:
                continue
            if _breadcrumb(chunk) != section or chunk.vector is None:
                continue
            similarity = float(chunk.vector @ query_vector)
            if similarity > self.params.related_min_score:
                scored.append((similarity, chunk_index, chunk))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [chunk for _, _, chunk in scored[: self.params.max_related]]

    @staticmethod
    def _added(chunk: Hit, hit: NodeWithScore) -> NodeWithScore:
        node = hit_to_node(Hit(chunk.row, hit.score or 0.0))
        node.metadata["enriched_from"] = hit.node.node_id
        return NodeWithScore(node=node, score=hit.score)


def with_parent_summaries(nodes: list[NodeWithScore]) -> tuple[list[NodeWithScore], dict[str, int]]:
    """Copies of ``nodes`` carrying their document's summary line, and how many lines came from
    each source (``none``: a chunk whose document has neither)."""
    counts = dict.fromkeys([*PARENT_SUMMARY_SOURCES, "none"], 0)
    shown: list[NodeWithScore] = []
    for node in nodes:
        metadata = node.node.metadata
        source = next((key for key in PARENT_SUMMARY_SOURCES if str(metadata.get(key) or "").strip()), None)
        counts[source or "none"] += 1
        if source is None:
            shown.append(node)
            continue
        # A copy: the retriever's node (kept in the trace as retrieved) is left as it was.
        copy = node.node.model_copy(update={"metadata": {**metadata, PARENT_SUMMARY: str(metadata[source])}})
        shown.append(NodeWithScore(node=copy, score=node.score))
    return shown, {key: count for key, count in counts.items() if count}


def _breadcrumb(chunk: Hit) -> str | None:
    raw = chunk.row.get("metadata")
    try:
        metadata = json.loads(raw) if raw else {}
    except ValueError:
        return None
    return metadata.get("breadcrumb") if isinstance(metadata, dict) else None
