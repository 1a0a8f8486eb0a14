"""mypy checks every built-in stage against its role's protocol (``ragkit.stages.roles``) here.

Nothing imports this module at run time: the assignments below exist for the type checker only,
and one fails the lint when a stage's calls stop matching its role's (a plugin's author writes the
same line for their stage). A new built-in stage gets a line here (``tests/stages/test_roles.py``
checks that every one in ``BUILT_IN_STAGES`` has one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragkit.stages.answer.answer_check import AnswerCheckJudge
    from ragkit.stages.answer.generator import Generator
    from ragkit.stages.answer.groundedness import GroundednessJudge
    from ragkit.stages.chunking.stage import ChunkingJudge
    from ragkit.stages.context.compression import CompressionJudge
    from ragkit.stages.context.enrichment import EnrichmentJudge
    from ragkit.stages.context.rerank import RerankJudge
    from ragkit.stages.query.condense import CondenseJudge
    from ragkit.stages.query.profile import ProfileJudge
    from ragkit.stages.query.router.stage import RouterJudge
    from ragkit.stages.query.strategy import StrategyJudge
    from ragkit.stages.query.transforms import HyDERetriever, MultiQueryRetriever
    from ragkit.stages.retrieval.quality_gate.stage import QualityGate
    from ragkit.stages.retrieval.retrieval_judge import RetrievalJudge
    from ragkit.stages.roles import (
        CheckRole,
        ChunkingRole,
        ContextRole,
        FollowUpRole,
        GateRole,
        GenerateRole,
        ProfileRole,
        RefineRole,
        RouteRole,
        StrategyRole,
        TransformRole,
        VerifyRole,
    )

    chunking: type[ChunkingRole] = ChunkingJudge
    router: type[RouteRole] = RouterJudge
    condense: type[FollowUpRole] = CondenseJudge
    profile: type[ProfileRole] = ProfileJudge
    strategy: type[StrategyRole] = StrategyJudge
    hyde: type[TransformRole] = HyDERetriever
    multi_query: type[TransformRole] = MultiQueryRetriever
    quality_gate: type[GateRole] = QualityGate
    retrieval: type[RefineRole] = RetrievalJudge
    rerank: type[ContextRole] = RerankJudge
    enrichment: type[ContextRole] = EnrichmentJudge
    compression: type[ContextRole] = CompressionJudge
    generator: type[GenerateRole] = Generator
    groundedness: type[VerifyRole] = GroundednessJudge
    answer_check: type[CheckRole] = AnswerCheckJudge
