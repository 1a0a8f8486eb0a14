"""The document profiles on chunks (the profile judge's ``on_chunks``, the agentic design's): every
chunk a run retrieves carries its document's type, technical density and domain tags in its
metadata, so the stages after retrieval read them; off (the default) the chunks are as before,
and the option changes no chunk set or index key (only the run id of a run that turns it on)."""

from __future__ import annotations

import pytest

from ragkit.corpus.profile import CHUNK_FIELDS, heuristic_profiles
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.execution_report import ExecutionReport
from ragkit.experiments.executor import LocalExecutor
from ragkit.experiments.runner import prepare
from ragkit.results import ResultStore
from tests.factories import write_beir

pytestmark = pytest.mark.integration


def test_each_retrieved_chunk_carries_its_documents_profile_only_with_on_chunks(tmp_path, isolated_data_dir):
    dataset = write_beir(tmp_path / "beir")
    config = config_from_dict({
        "name": "on_chunks", "dataset": {"path": str(dataset)}, "embedders": [], "retrievers": ["bm25"],
        "chunkers": ["document"], "top_k": 3,
        "judges": {"profile": {"mode": "heuristic", "params": [{"on_chunks": False}, {"on_chunks": True}]}},
    })
    plan, derived_dir = prepare(config)
    assert len(plan.runs) == 2 and len(plan.index_steps) == 1 and len(plan.chunk_steps) == 1
    executor = LocalExecutor(derived_dir, ResultStore(tmp_path / "out"), isolated_data_dir)
    index = executor.open_index(plan, plan.index_steps[0], ExecutionReport())
    by_option = {run.point.judge("profile").params.get("on_chunks", False): run for run in plan.runs}
    off = executor.pipeline_for(plan, by_option[False], index).answer("cats dogs sun")
    on = executor.pipeline_for(plan, by_option[True], index).answer("cats dogs sun")
    assert off.nodes and not any(field in node.node.metadata for node in off.nodes for field in CHUNK_FIELDS)
    # The same chunks, each with its own document's profile (by rule: the cat text is general prose).
    assert [n.node.node_id for n in on.nodes] == [n.node.node_id for n in off.nodes]
    expected = {profile.doc_id: profile for profile in heuristic_profiles(list(plan.corpus.documents))}
    for node in on.nodes:
        profile = expected[node.node.metadata["doc_id"]]
        assert {field: node.node.metadata[field] for field in CHUNK_FIELDS} == {
            "doc_type": profile.type, "technical_density": profile.technical_density,
            "domain_tags": list(profile.domain_tags)}
    assert len({tuple(node.node.metadata["domain_tags"]) for node in on.nodes}) == len(on.nodes) > 1
    # The chunk a second search returns is a new node: the profile is not left on a shared object.
    again = executor.pipeline_for(plan, by_option[False], index).answer("cats dogs sun")
    assert not any("doc_type" in node.node.metadata for node in again.nodes)


def test_on_chunks_at_its_default_is_not_in_the_key():
    from ragkit.stages.query.params import ProfileParams

    assert "on_chunks" not in ProfileParams().key_dump()
    assert ProfileParams(on_chunks=True).key_dump()["on_chunks"] is True
