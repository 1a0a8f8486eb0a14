"""Question sets generated from a corpus, with answers that are exact spans of its documents.

Modules, one job each: ``sampling`` (passages and answer spans, balanced over documents and
sections), ``prompts`` (templates and reply shapes), ``replies`` (cleaning and every drop
reason), ``generate`` (plan, calls, record), ``writer`` (files); near-duplicates are
``ragkit.questions.dedup``, shared with the quality report.
"""

from ragkit.questions.generation.generate import (
    STAGE,
    GeneratedSet,
    GenerationParams,
    PlannedCall,
    dry_run_counts,
    generate_questions,
    plan_generation,
)
from ragkit.questions.generation.sampling import QUESTION_TYPES
from ragkit.questions.generation.writer import read_rows, set_paths, write_rows, write_set

__all__ = [
    "QUESTION_TYPES",
    "STAGE",
    "GeneratedSet",
    "GenerationParams",
    "PlannedCall",
    "dry_run_counts",
    "generate_questions",
    "plan_generation",
    "read_rows",
    "set_paths",
    "write_rows",
    "write_set",
]
