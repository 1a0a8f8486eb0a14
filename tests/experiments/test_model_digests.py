"""Each LLM role's model digest in the runs table (``llm_digest.<role>``), beside the run id, and
the regression gate refusing two folders whose model was re-pulled under the same tag.

Against the fake Ollama server: a run records the digest its /api/tags lists; the tag re-pulled
(another digest), the same experiment into a second folder keeps its run ids but the gate names
the role and both digests. The local backend's digest is the GGUF's sha256, hashed once."""

from __future__ import annotations

import hashlib
import os
from types import SimpleNamespace

import pandas as pd
import pytest

import ragkit.llms.local as local
from ragkit.analysis.regression import selection_differences
from ragkit.cli import main
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.executor import LocalExecutor
from ragkit.experiments.runner import run_experiment
from ragkit.llms.local import LocalLLM, LocalParams, file_digest
from ragkit.llms.openai_compat import OpenAICompatibleLLM, OpenAICompatibleParams
from ragkit.registry import ComponentSpec
from ragkit.results import ResultStore
from tests.experiments.test_dead_llm import DOCS, QUESTIONS, experiment
from tests.factories import write_beir
from tests.llms.fake_ollama import FIRST_DIGEST, REPULLED_DIGEST, FakeOllama


@pytest.fixture
def server():
    fake = FakeOllama().start()
    yield fake
    fake.stop()


@pytest.mark.integration
def test_a_run_records_the_ollama_digest_and_the_gate_refuses_a_re_pulled_tag(tmp_path, server, capsys):
    config = config_from_dict(experiment(write_beir(tmp_path / "beir", DOCS, QUESTIONS), server.url, top_k=[2]))
    run_experiment(config, tmp_path / "before")
    runs = ResultStore(tmp_path / "before").read("runs")
    assert runs["llm_digest.generator"].tolist() == [FIRST_DIGEST]
    assert runs["llm.generator"].tolist() == ["ollama:fake-model"]

    server.digests["fake-model:latest"] = REPULLED_DIGEST  # `ollama pull` put another model under the tag
    run_experiment(config, tmp_path / "after")
    after = ResultStore(tmp_path / "after").read("runs")
    assert after["run_id"].tolist() == runs["run_id"].tolist()  # the digest is not part of the run id
    assert after["llm_digest.generator"].tolist() == [REPULLED_DIGEST]

    code = main(["compare", str(tmp_path / "before"), str(tmp_path / "after"), "--fail-if", "recall@2 < -0.1"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"the generator model's digest differs ({FIRST_DIGEST} -> {REPULLED_DIGEST})" in err
    assert main(["compare", str(tmp_path / "before"), str(tmp_path / "after"), "--fail-if", "recall@2 < -0.1",
                 "--allow-different"]) == 0
    # The same tag and digest: comparable.
    run_experiment(config, tmp_path / "again")
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "after"), str(tmp_path / "again"), "--fail-if", "recall@2 < -0.1"]) == 0


@pytest.mark.unit
def test_an_unknown_or_missing_digest_is_not_a_difference_and_the_page_warns_on_a_re_pulled_tag():
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "llm.generator": ["ollama:m", "ollama:m", "ollama:other"],
                         "llm_digest.generator": ["sha256:1", "sha256:2", "sha256:3"]})
    assert selection_differences(runs) == [
        "the selected runs' generator model ollama:m has 2 digests (sha256:1, sha256:2): it was re-pulled between runs"]
    # Different models differ in digest by nature: that is a factor compared, not a warning.
    assert selection_differences(runs.iloc[[0, 2]]) == []
    assert selection_differences(runs.assign(**{"llm_digest.generator": ["sha256:1", "unknown", None]})) == []


@pytest.mark.unit
def test_the_gate_compares_digests_only_where_both_folders_know_them():
    from ragkit.analysis.loading import Results
    from ragkit.analysis.regression import differences

    def results(digest):
        runs = pd.DataFrame([{"run_id": "r", "label": "r", "corpus_id": "c", "llm.judge": "local:m",
                              "llm_digest.judge": digest}])
        return Results(runs, pd.DataFrame(columns=["run_id", "question_id", "metric", "value", "error"]))

    pairs = pd.DataFrame({"base_run": ["r"], "new_run": ["r"], "how": ["run id"], "label": ["r"]})
    assert differences(results("sha256:a"), results("sha256:b"), pairs) == [
        "r: the judge model's digest differs (sha256:a -> sha256:b)"]
    assert differences(results("sha256:a"), results("unknown"), pairs) == []
    assert differences(results(None), results("sha256:b"), pairs) == []


@pytest.mark.unit
def test_the_local_digest_is_the_files_sha256_hashed_once_per_path_size_and_mtime(tmp_path, monkeypatch):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 5000)
    expected = "sha256:" + hashlib.sha256(gguf.read_bytes()).hexdigest()
    replaced = "sha256:" + hashlib.sha256(b"GGUF another model").hexdigest()
    hashed = []
    real = hashlib.sha256
    monkeypatch.setattr(local.hashlib, "sha256", lambda: hashed.append(1) or real())

    first = LocalLLM(LocalParams(model_path=str(gguf))).model_digest()
    second = LocalLLM(LocalParams(model_path=str(gguf), temperature=0.5)).model_digest()
    assert first == second == expected
    assert len(hashed) == 1  # the second backend (and every later run row) reads the cache

    gguf.write_bytes(b"GGUF another model")  # replaced in place: size and mtime change
    os.utime(gguf, ns=(1, 1))
    assert file_digest(gguf) == replaced
    assert len(hashed) == 2
    assert LocalLLM(LocalParams(model_path=str(tmp_path / "gone.gguf"))).model_digest() is None


@pytest.mark.unit
def test_an_openai_compatible_server_records_unknown(tmp_path, monkeypatch):
    assert OpenAICompatibleLLM(OpenAICompatibleParams(model="m")).model_digest() is None
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF tiny")
    executor = LocalExecutor(tmp_path / "derived", ResultStore(tmp_path / "out"), data_dir=tmp_path / "data")
    run = SimpleNamespace(llms={"generator": ComponentSpec(type="openai", params={"model": "m"}),
                                "evaluation": ComponentSpec(type="local", params={"model_path": str(gguf)})})
    assert executor.llm_digests(run) == {
        "llm_digest.evaluation": "sha256:" + hashlib.sha256(b"GGUF tiny").hexdigest(),
        "llm_digest.generator": "unknown"}
