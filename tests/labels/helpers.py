"""A small results folder of three runs for the labels tests: retrievals, answers and questions."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ragkit.results import ResultStore

DOCS = {
    "d1": "Bats host many coronaviruses. Masks reduce spread. Vaccines train the immune system well.",
    "d2": "Hand washing removes viruses. Ventilation lowers risk indoors. Distance helps as well.",
}
QUESTIONS = {"q1": ("What do bats host?", "d1"), "q2": ("What lowers indoor risk?", "d2")}
# run -> question -> ranked spans (doc, start, end); overlapping on purpose
RANKED = {
    "r1": {"q1": [("d1", 0, 29), ("d1", 30, 50), ("d2", 0, 29), ("d1", 51, 90)],
           "q2": [("d2", 30, 62), ("d2", 0, 29), ("d1", 0, 29)]},
    "r2": {"q1": [("d1", 30, 50), ("d1", 0, 29), ("d2", 30, 62), ("d2", 63, 88)],
           "q2": [("d2", 63, 88), ("d2", 30, 62)]},
    "r3": {"q1": [("d1", 0, 15), ("d1", 51, 90), ("d1", 0, 29)],
           "q2": [("d2", 30, 62), ("d1", 30, 50), ("d2", 0, 15)]},
}
ANSWERS = {("r1", "q1"): "coronaviruses", ("r2", "q1"): "many coronaviruses", ("r3", "q1"): "masks",
           ("r1", "q2"): "ventilation", ("r2", "q2"): "distance"}


def retrieval_rows(run: str) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": run, "question_id": question, "rank": rank, "chunk_id": f"{run}-{question}-{rank}",
                          "doc_id": doc, "start_char": start, "end_char": end, "score": 1.0 / rank}
                         for question, spans in RANKED[run].items()
                         for rank, (doc, start, end) in enumerate(spans, start=1)])


def make_results(folder: Path, scores: pd.DataFrame | None = None,
                 judgements: pd.DataFrame | None = None) -> ResultStore:
    store = ResultStore(folder)
    store.write_questions("set1", pd.DataFrame([{"question_id": q, "text": text, "document": doc}
                                                for q, (text, doc) in QUESTIONS.items()]))
    for number, run in enumerate(RANKED, start=1):
        store.write_run(run, {"run_id": run, "corpus": "tiny", "chunker": "token", "embedder": None,
                              "retriever": "bm25", "top_k": 4, "chunker.chunk_size": 64 * number})
        answers = pd.DataFrame([{"run_id": r, "question_id": q, "answer": text, "valid": True}
                                for (r, q), text in ANSWERS.items() if r == run])
        tables = {"retrievals": retrieval_rows(run), "answers": answers}
        if scores is not None:
            tables["scores"] = scores[scores["run_id"] == run]
        if judgements is not None:
            tables["judgements"] = judgements[judgements["run_id"] == run]
        store.commit_shard(run, list(QUESTIONS), tables)
    return store
