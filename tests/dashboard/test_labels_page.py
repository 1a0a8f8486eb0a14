"""The Label page (pool, grade with configurations hidden, save) and the Compare page's judges-against-people
part, through Streamlit's AppTest."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ragkit.labels.store import LabelStore
from tests.dashboard.test_pages import assert_ok, page
from tests.labels.helpers import DOCS, make_results

pytestmark = pytest.mark.integration


@pytest.fixture
def labelled_results(tmp_path) -> tuple[Path, Path]:
    from ragkit.settings import get_settings

    scores = pd.DataFrame({"run_id": ["r1", "r1", "r2", "r2"], "question_id": ["q1", "q2"] * 2,
                           "metric": ["faithfulness"] * 4, "value": [0.9, 0.1, 0.8, 0.7], "error": [None] * 4})
    out = get_settings().results_root() / "labelled"
    make_results(out, scores)
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()),
                                          encoding="utf-8")
    return out, dataset


def test_label_page_pools_hides_the_runs_and_saves_a_session(labelled_results):
    out, dataset = labelled_results
    app = page("8_labels.py").run()
    assert_ok(app)
    assert any("No pool yet" in info.value for info in app.info)
    app.number_input[0].set_value(2)
    app.text_input[0].set_value(str(dataset))
    app.button(key="make_pool").click().run()
    assert_ok(app)
    pool = LabelStore(out).latest_pool()
    assert pool is not None and pool.k == 2 and pool.runs == ["r1", "r2", "r3"]
    shown = " ".join(text.value for text in app.text)
    assert pool.questions[0].chunks[0].text in shown
    assert not any(run in shown for run in ("r1", "r2", "r3"))  # configurations hidden
    app.text_input(key="annotator").set_value("ann")
    first, second = pool.questions[0].chunks[:2]
    app.radio(key=f"rel.{pool.pool_id}.{first.item_id}").set_value(2)
    app.radio(key=f"rel.{pool.pool_id}.{second.item_id}").set_value(0)
    answer = pool.questions[0].answers[0]
    app.radio(key=f"gro.{pool.pool_id}.{answer.item_id}").set_value(True)
    app.button(key="save_labels").click().run()
    assert_ok(app)
    saved = LabelStore(out).current(pool.pool_id)
    assert sorted(zip(saved["item_id"], saved["relevance"].astype("Float64").fillna(-1))) == sorted(
        [(first.item_id, 2), (second.item_id, 0), (answer.item_id, -1)])
    assert set(saved["annotator"]) == {"ann"}
    assert bool(saved.loc[saved["item_id"] == answer.item_id, "grounded"].item()) is True


def test_compare_page_shows_judges_against_people_when_labels_exist(labelled_results):
    out, _ = labelled_results
    app = page("5_compare.py", section="Judges vs people").run()
    assert_ok(app)
    assert "Judges against people" not in [header.value for header in app.subheader]
    assert any(caption.value.startswith("No labels for this experiment yet") for caption in app.caption)
    from ragkit.labels.pooling import PoolParams
    from ragkit.labels.sources import make_pool

    pool, _ = make_pool(out, PoolParams(runs=["r1", "r2"], k=2))
    store = LabelStore(out)
    store.save_pool(pool)
    store.add([{"annotator": "ann", "pool_id": pool.pool_id, "question_id": q.question_id, "document": q.document,
                "item_kind": "answer", "item_id": a.item_id, "run_id": a.run_id, "grounded": a.run_id == "r1"}
               for q in pool.questions for a in q.answers])
    app = page("5_compare.py", section="Judges vs people").run()
    assert_ok(app)
    assert "Judges against people" in [header.value for header in app.subheader]
    table = next(d.value for d in app.dataframe if "kappa [95% CI]" in d.value.columns)
    assert table["decision"].tolist() == ["faithfulness vs grounded"] and table["accuracy"].tolist() == ["0.250"]
    ppi = next(d.value for d in app.dataframe if "estimator" in d.value.columns)
    assert set(ppi["estimator"]) == {"judge only", "human only", "PPI", "PPI++"}
    # Two documents: the intervals' warning is shown, on this page and on the Label page
    assert any("CIs from 2 document(s), fewer than 10" in warning.value for warning in app.warning)
    assert table["reading"].tolist() == ["CIs rough (2 < 10 documents)"]
    labelling = page("8_labels.py").run()
    assert_ok(labelling)
    assert any("CIs from 2 document(s), fewer than 10" in warning.value for warning in labelling.warning)
