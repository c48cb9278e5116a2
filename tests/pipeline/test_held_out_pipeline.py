"""Held-out domains through the pipeline: results entries, averages, details, costs, written files."""

import json
import math

import numpy as np
import pytest

from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)
from tests.models.held_out_cases import pipeline_run, text_token_documents, write_nanoset, write_text_jsonl

SEQUENCE_LENGTH = 32


@pytest.fixture(scope="module")
def run(tiny_checkpoint, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp("held_out_pipeline")
    text = write_text_jsonl(folder / "web.jsonl")
    rng = np.random.default_rng(0)
    documents = [text_token_documents(rng.integers(20, 200, size=12), seed=file) for file in range(2)]
    nanoset = write_nanoset(folder / "code", documents)
    held_out = {"web": str(text), "code": {"path": str(nanoset), "tokens": 4 * SEQUENCE_LENGTH}}
    output = folder / "out"
    result = run_distributed(
        pipeline_run,
        1,
        str(tiny_checkpoint),
        held_out,
        SEQUENCE_LENGTH,
        "lighteval|arc:easy|0",
        str(output),
        timeout=240,
    )[0]
    return result, output, documents


def test_results_hold_each_domain_and_the_averages(run):
    result, _, _ = run
    results = result["content"]["results"]
    assert result["result_names"] == ["lighteval|arc:easy|0", "heldout|web", "heldout|code"]
    for key in ("heldout|web", "heldout|code", "heldout|_micro", "heldout|_macro"):
        scores = results[key]
        assert set(scores) == {f"{m}{s}" for m in ("loss", "perplexity", "bits_per_byte") for s in ("", "_stderr")}
        assert scores["perplexity"] == pytest.approx(math.exp(scores["loss"]))
        assert scores["loss_stderr"] > 0
    # the `all` average is over tasks only
    assert set(results["all"]) == set(results["lighteval|arc:easy|0"])
    web, code = results["heldout|web"], results["heldout|code"]
    assert results["heldout|_macro"]["loss"] == pytest.approx((web["loss"] + code["loss"]) / 2)
    n_web, n_code = len(result["windows"]["web"]), len(result["windows"]["code"])
    assert (n_web, n_code) == (10, 4)
    micro = (web["loss"] * n_web + code["loss"] * n_code) / (n_web + n_code)
    assert results["heldout|_micro"]["loss"] == pytest.approx(micro)


def test_details_costs_and_description(run):
    result, _, _ = run
    content = result["content"]
    rows = result["details"]["heldout|web"]
    assert len(rows) == 10 and rows[0]["sampling_method"] == "HELDOUT"
    nll = np.array([row["metrics"]["nll"] for row in rows])
    sizes = np.array([row["metrics"]["bytes"] for row in rows])
    assert content["results"]["heldout|web"]["loss"] == pytest.approx(nll.sum() / (10 * SEQUENCE_LENGTH))
    assert content["results"]["heldout|web"]["bits_per_byte"] == pytest.approx(nll.sum() / math.log(2) / sizes.sum())
    cost = content["task_costs"]["heldout|code"]
    assert cost["docs"] == 4 and cost["processed_tokens"] == 4 * SEQUENCE_LENGTH and cost["seconds"] > 0
    described = content["config_tasks"]["heldout|code"]
    assert described["kind"] == "nanoset" and described["sequences"] == 4 and described["token_size"] == 2
    assert content["config_tasks"]["heldout|web"]["kind"] == "text"
    assert content["summary_tasks"]["heldout|web"]["num_samples"] == 10


def test_written_everywhere(run):
    result, output, _ = run
    files = list((output / "results").rglob("results_*.json"))
    assert len(files) == 1
    written = json.loads(files[0].read_text())
    assert "heldout|_micro" in written["results"]
    assert any(p.name.startswith("details_heldout") for p in (output / "details").rglob("*.parquet"))
    assert "eval/heldout|web/loss" in result["scalars"] and "eval_time/heldout|code" in result["scalars"]
    assert "heldout|_macro" in result["table"]


def test_nanoset_windows_are_the_files_chunks(run):
    """Each window is a chunk of sequence_length + 1 tokens of one file, as datatrove reads them."""
    result, _, documents = run
    chunks = []
    for documents_of_file in documents:
        tokens = [t for doc in documents_of_file for t in doc]
        width = SEQUENCE_LENGTH + 1
        chunks += [tokens[i * width : (i + 1) * width] for i in range(len(tokens) // width)]
    assert all(window in chunks for window in result["windows"]["code"])
    assert len({tuple(w) for w in result["windows"]["code"]}) == 4
