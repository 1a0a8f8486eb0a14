"""Equal-budget metrics: what the first n tokens of the final context hold.

Comparing chunkers at equal k is unfair (5 chunks of 1024 tokens hold four times the text of 5
chunks of 256), so ``recall@{n}tok`` and ``span_recall@{n}tok`` compare them at an equal amount
of context, for n in ``ragkit.metrics.names.TOKEN_BUDGETS``.

The cut rule, exactly: walk the final context in rank order, counting each chunk's own text in
cl100k tokens (the tokenizer of the token chunker). A chunk is taken whole while it fits in the
tokens left. The chunk that crosses the budget contributes the characters of its first
``remaining`` tokens: the span (doc_id, start, start + c), where c counts the characters whose
bytes all lie in those tokens. Every chunk after it, and any chunk that contributes 0 tokens (or
0 characters), is out. Then, over the spans kept:

- recall@{n}tok = relevant documents among the kept spans' documents / all relevant documents
  (a document counts once any of its tokens are in the budget);
- span_recall@{n}tok = answer groups covered by a kept span / all groups, with the overlap and
  any-of / all-of rules of ``ragkit.metrics.spans`` (a cut chunk covers only its kept part).

A final context shorter than n tokens is scored whole: a configuration that passes on less
context is not given more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ragkit.metrics.documents import doc_recall, has_relevant
from ragkit.metrics.final_context import FinalContext
from ragkit.metrics.names import BUDGET_FAMILIES, TOKEN_BUDGETS, budget_name
from ragkit.metrics.ranking import RetrievedSpan
from ragkit.metrics.spans import AnswerGroups, has_spans, span_recall


def budget_cut(chunks: Sequence[RetrievedSpan], tokens: Sequence[int], budget: int,
               prefix_chars: Callable[[int, int], int]) -> list[RetrievedSpan]:
    """The spans of ``chunks`` inside the first ``budget`` tokens; ``tokens`` counts each chunk's
    tokens and ``prefix_chars(index, n)`` the characters of chunk ``index``'s first n tokens."""
    if budget < 1:
        raise ValueError(f"budget must be >= 1 token, got {budget}")
    kept: list[RetrievedSpan] = []
    remaining = budget
    for index, ((doc_id, start, end), count) in enumerate(zip(chunks, tokens, strict=True)):
        if remaining == 0:
            break
        if count == 0:
            continue
        if count <= remaining:
            kept.append((doc_id, start, end))
            remaining -= count
            continue
        chars = prefix_chars(index, remaining)
        if chars > 0:
            kept.append((doc_id, start, start + chars))
        break
    return kept


def budget_metrics(context: FinalContext, relevant_docs: Mapping[str, float] | None, groups: AnswerGroups | None,
                   budgets: Sequence[int] = TOKEN_BUDGETS) -> dict[str, float]:
    """recall and span_recall at each budget, for the levels the ground truth allows."""
    doc_family, span_family = BUDGET_FAMILIES
    scores: dict[str, float] = {}
    for budget in budgets:
        kept = budget_cut(context.chunks, context.tokens, budget, context.prefix_chars)
        if has_relevant(relevant_docs):
            scores[budget_name(doc_family, budget)] = doc_recall((doc_id for doc_id, _, _ in kept), relevant_docs)
        if has_spans(groups):
            scores[budget_name(span_family, budget)] = span_recall(kept, groups)
    return scores
