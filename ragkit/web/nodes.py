"""Web results as retrieved chunks, so the generator and the results tables take them unchanged."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.hashing import text_sha256
from ragkit.web.base import WebResult

WEB_SOURCE = "web"
# Bookkeeping keys, hidden from the LLM like a chunk's; the title and URL stay visible.
_NOT_FOR_LLM = ("doc_id", "start_char", "end_char", "chunk_index", "source")


def web_nodes(results: list[WebResult]) -> list[NodeWithScore]:
    """One node per distinct URL, in the provider's order. Web results carry no similarity score
    comparable with the retrievers', so a node's score is its reciprocal rank, 1 / (rank + 1)."""
    nodes: list[NodeWithScore] = []
    seen: set[str] = set()
    for result in results:
        if result.url in seen:
            continue
        seen.add(result.url)
        rank = len(nodes)
        text = "\n".join(part for part in (result.title.strip(), result.snippet.strip()) if part) or result.url
        metadata = {"doc_id": f"{WEB_SOURCE}:{result.url}", "start_char": 0, "end_char": len(text),
                    "chunk_index": rank, "source": WEB_SOURCE, "url": result.url, "title": result.title}
        node = TextNode(
            id_=f"{WEB_SOURCE}:{text_sha256(result.url)[:16]}",
            text=text,
            metadata=metadata,
            start_char_idx=0,
            end_char_idx=len(text),
            excluded_embed_metadata_keys=list(metadata),
            excluded_llm_metadata_keys=list(_NOT_FOR_LLM),
        )
        nodes.append(NodeWithScore(node=node, score=1.0 / (rank + 1)))
    return nodes
