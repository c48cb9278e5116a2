"""`lighteval-nanotron report A B` doc by doc on two real runs: the demo's model trained by
scripts/calibrate_signal.py (seed 1 at learning rate 3e-3, and at 6e-4), steps 150-200, details
kept for ARC-Easy and the held-out domain (tests/analysis/data/README.md)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

from lighteval_nanotron.analysis.per_doc import NO_DETAILS
from lighteval_nanotron.cli.main import main

DATA = Path(__file__).parent / "data" / "two_runs"
RUNS = {name: DATA / name / "eval" for name in ("seed1", "low_lr")}
ARC, HELDOUT = "lighteval|arc_eng_cf:easy|0", "heldout|wikipedia"


def per_doc(run: str, step: int, task: str, metric: str) -> dict[str, float]:
    """`{doc id: value}` read straight from the run's details file at `step`."""
    (file,) = (RUNS[run] / "details").glob(f"*/{run}/{step}/*/details_{task}_*.parquet")
    rows = pq.read_table(file, columns=["doc_id", "metrics"]).to_pylist()
    return {row["doc_id"]: row["metrics"][metric] for row in rows}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    output = tmp_path_factory.mktemp("report") / "r.png"
    args = ["report", str(RUNS["seed1"]), str(RUNS["low_lr"]), "--last", "3", "--effect", "0.01"]
    return args + ["--output", str(output)]


def test_json_mean_paired_difference_is_the_mean_of_the_details_per_doc_differences(report, capsys):
    assert main([*report, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    at_step, over_last = found["paired"]
    assert at_step["steps"] == [200] and over_last["steps"] == [150, 175, 200]
    compared = {(c["task"], c["metric"]) for c in at_step["comparisons"]}
    assert compared == {(ARC, m) for m in ("acc", "acc_norm", "gold_bpb", "normalized_mc_prob_norm")} | {
        (HELDOUT, "loss")
    }
    for c in at_step["comparisons"]:
        a, b = per_doc("seed1", 200, c["task"], c["metric"]), per_doc("low_lr", 200, c["task"], c["metric"])
        shared = sorted(set(a) & set(b))
        assert c["method"] == "paired" and c["shared"] == len(shared) == len(a)
        assert c["difference"] == pytest.approx(sum(a[d] - b[d] for d in shared) / len(shared), abs=1e-12)
        assert c["low"] <= c["difference"] <= c["high"]
        assert c["wins"] + c["losses"] + c["ties"] == len(shared)
        assert c["docs_for_effect"] >= 2
    for c in over_last["comparisons"]:
        a = [per_doc("seed1", s, c["task"], c["metric"]) for s in (150, 175, 200)]
        b = [per_doc("low_lr", s, c["task"], c["metric"]) for s in (150, 175, 200)]
        expected = sum(sum(x[d] for x in a) / 3 - sum(y[d] for y in b) / 3 for d in a[0]) / len(a[0])
        assert c["difference"] == pytest.approx(expected, abs=1e-12)
    held_out = next(c for c in at_step["comparisons"] if c["task"] == HELDOUT)
    assert held_out["better"] == "A"  # the higher learning rate: a lower held-out loss, beyond every noise
    total = held_out["stderr"] ** 2 + held_out["checkpoint_noise"] ** 2  # no seed runs
    assert held_out["p_runs"] == pytest.approx(2 * stats.norm.sf(abs(held_out["difference"]) / total**0.5))
    assert held_out["p_adjusted"] < 0.05 and held_out["seed_noise"] == 0
    assert at_step["verdicts"][HELDOUT]["verdict"] == "A ahead"
    assert at_step["verdicts"]["lighteval|piqa_eng_cf|0"] == {"verdict": "not comparable", "why": NO_DETAILS}
    assert found["paired_method"]["multiple_comparisons"].startswith("Holm")
    assert found["runs"]["lighteval_nanotron_demo/seed1"]["series"][HELDOUT]["loss"]["mde"] > 0


def test_printed_tables_state_the_method_and_one_verdict_per_task(report, capsys):
    assert main(report) == 0
    out = capsys.readouterr().out
    assert "doc by doc at step 200: paired bootstrap (2000 resamples, seed 0) over the docs" in out
    assert "Holm's method over the 5 comparisons (family-wise 5%)" in out and "no --seed-runs" in out
    assert f"  {HELDOUT}: lighteval_nanotron_demo/seed1 ahead (loss)" in out
    assert "Docs for 0.01" in out and "MDE80" in out


def test_seed_runs_join_the_noise(report, capsys):
    """Given as seed runs of one config, the two runs' own spread (their config's difference)
    leaves nothing ahead; the seed noise is the standard deviation of their values."""
    assert main([*report, "--json", "--seed-runs", str(RUNS["seed1"]), str(RUNS["low_lr"])]) == 0
    at_step = json.loads(capsys.readouterr().out)["paired"][0]
    held_out = next(c for c in at_step["comparisons"] if c["task"] == HELDOUT)
    values = [json.loads(f.read_text())["results"][HELDOUT]["loss"] for f in map(results_at_200, RUNS.values())]
    assert held_out["seed_noise"] == pytest.approx(abs(values[0] - values[1]) / 2**0.5)
    assert held_out["better"] is None and at_step["verdicts"][HELDOUT]["verdict"] == "within noise"


def results_at_200(folder: Path) -> Path:
    (file,) = (folder / "results").glob("*/*/200/results_*.json")
    return file


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--last", "1"], "--last 1: average at least 2"),
        (["--effect", "-0.01"], "--effect -0.01: use a positive"),
        (["--seed-runs", str(RUNS["seed1"])], "--seed-runs: 1 run found"),
    ],
)
def test_bad_options_are_one_error_line(report, capsys, option, message):
    assert main([*report, *option]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1


def test_json_across_runs_is_the_published_snr_of_the_results(report, capsys):
    """Three runs (the first twice, told apart by folder): signal, noise and SNR of each entry from
    the last 3 evaluations in the results files, as Heineman et al. define them."""
    runs = [str(RUNS["seed1"]), str(RUNS["low_lr"]), str(RUNS["seed1"])]
    assert main(["report", *runs, "--json", "--last", "3", "--output", report[-1]]) == 0
    found = json.loads(capsys.readouterr().out)
    (held_out,) = [i for i in found["across_runs"] if i["entry"] == HELDOUT and i["metric"] == "loss"]
    last3 = {
        name: [
            json.loads(next((folder / "results").glob(f"*/*/{step}/results_*.json")).read_text())["results"][HELDOUT][
                "loss"
            ]
            for step in (150, 175, 200)
        ]
        for name, folder in RUNS.items()
    }
    means = [np.mean(last3["seed1"]), np.mean(last3["low_lr"]), np.mean(last3["seed1"])]
    pooled = last3["seed1"] + last3["low_lr"] + last3["seed1"]
    signal = (max(means) - min(means)) / np.mean(means)
    noise = np.std(pooled) / np.mean(pooled)
    assert (held_out["signal"], held_out["noise"], held_out["snr"]) == pytest.approx((signal, noise, signal / noise))
    assert found["across_runs_recommendation"].startswith("Separate these runs:")


def test_held_out_averages_are_not_tasks_without_details(tmp_path):
    """`heldout|_micro` / `_macro` average the domains: no verdict 'no per-doc details' for them."""
    from lighteval_nanotron.analysis import load_runs
    from lighteval_nanotron.analysis.per_doc import compare_pair

    runs = []
    for name, folder in RUNS.items():
        shutil.copytree(folder, tmp_path / name)
        for file in (tmp_path / name / "results").rglob("results_*.json"):
            content = json.loads(file.read_text())
            content["results"]["heldout|_micro"] = content["results"]["heldout|_macro"] = content["results"][HELDOUT]
            file.write_text(json.dumps(content))
        (run,) = load_runs(tmp_path / name).values()
        runs.append(run)
    (table,) = compare_pair(*runs)
    assert (
        HELDOUT in table.verdicts and "heldout|_micro" not in table.verdicts and "heldout|_macro" not in table.verdicts
    )
