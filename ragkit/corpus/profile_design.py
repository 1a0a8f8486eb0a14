"""The agentic design's document profiles: its 29 document types and its stratified sample of a
document (the profile judge's ``taxonomy: design`` and ``sample: stratified``).

Types, grouped as the design groups them: academic (research_paper, conference_paper,
journal_article, thesis, dissertation, literature_review), educational (tutorial, course_material,
textbook, lecture_notes, study_guide), technical (api_reference, technical_specification,
architecture_document, system_design), business (whitepaper, case_study, business_report,
proposal), legal (legal_document, contract, policy_document), general (blog_post, article,
guide, manual, faq, documentation) and other.

By rule (heuristic mode, or a model reply that cannot be used) a document gets the design type
nearest its basic type (``ragkit.corpus.profile.document_type``): academic -> research_paper,
code -> api_reference, documentation -> documentation, table and general -> other (the design
names no rule for them; its own fallback is other).

The stratified sample (the design's, in characters where it counts tokens at 4 characters each):
a document no longer than ``chars`` is shown whole; otherwise 45% of ``chars`` comes from the
start of the first 30% of the document, 22% from the end of its last 20%, and the rest from the
middle of what lies between, joined with markers that say where the cuts are.
"""

from __future__ import annotations

from typing import Literal

DesignDocumentType = Literal[
    "research_paper", "conference_paper", "journal_article", "thesis", "dissertation", "literature_review",
    "tutorial", "course_material", "textbook", "lecture_notes", "study_guide",
    "api_reference", "technical_specification", "architecture_document", "system_design",
    "whitepaper", "case_study", "business_report", "proposal",
    "legal_document", "contract", "policy_document",
    "blog_post", "article", "guide", "manual", "faq", "documentation",
    "other",
]
DESIGN_DOCUMENT_TYPES: tuple[str, ...] = DesignDocumentType.__args__  # type: ignore[attr-defined]
# What code and tables are among the basic types: documents whose exact terms a search must match.
DESIGN_TECHNICAL_TYPES = ("api_reference", "technical_specification")
FROM_BASIC = {"academic": "research_paper", "code": "api_reference", "documentation": "documentation",
              "table": "other", "general": "other"}

FIRST_SHARE, LAST_SHARE = 0.45, 0.22  # of the sample
FIRST_PART, LAST_PART = 0.30, 0.20  # of the document
MIDDLE_MARK = "\n\n[... middle section sampled ...]\n\n"
FINAL_MARK = "\n\n[... final section sampled ...]\n\n"


def stratified_sample(text: str, chars: int) -> str:
    """``text`` whole when it fits in ``chars``, else its stratified sample (module docstring)."""
    length = len(text)
    if length <= chars:
        return text
    first_end, last_start = int(length * FIRST_PART), int(length * (1 - LAST_PART))
    first_budget, last_budget = int(chars * FIRST_SHARE), int(chars * LAST_SHARE)
    middle_budget = chars - first_budget - last_budget
    first = text[:min(first_end, first_budget)]
    last = text[max(last_start, length - last_budget):]
    available = last_start - first_end
    if available > middle_budget:
        start = first_end + (available - middle_budget) // 2
        middle = text[start:start + middle_budget]
    else:
        middle = text[first_end:last_start]
    return f"{first}{MIDDLE_MARK}{middle}{FINAL_MARK}{last}"
