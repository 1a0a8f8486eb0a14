"""Labels: pooled candidates for people to grade, an LLM relevance judge, and judges measured
against people (agreement, prediction-powered means).

- ``pooling``: a question's pool is the union of several runs' top-k chunks, each once, shuffled.
- ``sources``: a pool's inputs (the results tables, the chunks' text from the corpus).
- ``store``: labels as an append-only table in the results folder (one file per session).
- ``sheets``: a pool as a CSV to fill in, and back; ``qrels``: TREC qrels export;
  ``ground_truth``: graded spans into a JSONL question set.
- ``relevance_judge``: 0-3 grades of pooled chunks, one cached call each.
- ``grades``: one grade per item and whose it is (human, judge or both).
- ``agreement``, ``judge_vs_human``: accuracy, kappa / alpha, confusion, bias, CIs by document.
- ``ppi``: judge-only, human-only, PPI and PPI++ means.
- ``tables``: what the report, the CLI and the dashboard show.
"""
