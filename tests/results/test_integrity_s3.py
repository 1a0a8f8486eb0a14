"""A damaged part on object storage (moto's S3 server on 127.0.0.1): the checksum in its marker
catches it, the report names it, a re-run recomputes exactly its run's questions and
``ragkit check --repair`` moves it aside (copy + delete); ``--out`` refuses a prefix of other
objects. The server and fixtures are those of test_s3.py."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from ragkit.analysis.report import render_report
from ragkit.cli import main
from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from ragkit.results.check import check_folder
from ragkit.results.output_folder import check_output_folder
from tests.factories import write_beir
from tests.results.test_s3 import BUCKET, DOCS, KEYS, QUESTIONS, grid, s3, s3_server, table  # noqa: F401

pytestmark = pytest.mark.integration


def test_a_damaged_part_on_object_storage_is_named_recomputed_and_set_aside(tmp_path, s3, capsys):  # noqa: F811
    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS)))
    remote = f"s3://{BUCKET}/experiments/heal"
    run_experiment(config, remote)
    before = {name: table(remote, name) for name in KEYS}
    store = ResultStore(remote)
    damaged = store.committed_entries("scores")[0]
    key = damaged.path.split("/", 1)[1]
    s3.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(100))

    assert f"scores/{damaged.stem}.parquet could not be read" in render_report(remote)
    assert [item.part for item in check_folder(ResultStore(remote)).damaged] == [damaged.stem]
    again = run_experiment(config, remote)
    assert again.questions_computed == len(QUESTIONS) and [item.part for item in again.set_aside] == [damaged.stem]
    for name in KEYS:
        pd.testing.assert_frame_equal(table(remote, name), before[name])
    aside = [item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="experiments/heal/_damaged/")["Contents"]]
    assert any(key.endswith("/scores.parquet") for key in aside) and any(key.endswith("/commit.json") for key in aside)
    assert main(["check", remote]) == 0, capsys.readouterr().out


def test_out_refuses_a_prefix_of_other_objects(s3):  # noqa: F811
    s3.put_object(Bucket=BUCKET, Key="papers/draft.pdf", Body=b"%PDF")
    with pytest.raises(ConfigError, match=r"it holds draft\.pdf \(1 entry\)"):
        check_output_folder(f"s3://{BUCKET}/papers")
    check_output_folder(f"s3://{BUCKET}/new")
