"""One configuration answering one question: the pipeline (``pipeline``), the record of one answer
(``trace``), the cost row of each step (``steps``), the checks of an answer (``answer_checks``),
and a run exported as code (``export``).

Public names load on first access (PEP 562), by import path: importing one submodule neither
loads nor depends on the others.
"""

from __future__ import annotations

from ragkit.lazy_exports import lazy_exports

_WHERE = {
    "Pipeline": "ragkit.pipeline.pipeline",
    "Trace": "ragkit.pipeline.trace",
    "AnswerChecker": "ragkit.pipeline.answer_checks",
    "StepRecorder": "ragkit.pipeline.steps",
    "stage_row": "ragkit.pipeline.steps",
    "build_pipeline": "ragkit.pipeline.export",
    "export_pipeline": "ragkit.pipeline.export",
}

__all__ = ["AnswerChecker", "Pipeline", "StepRecorder", "Trace", "build_pipeline", "export_pipeline", "stage_row"]

__getattr__ = lazy_exports(__name__, _WHERE)
