"""Files the project reads back may hold anything: a results file that is valid JSON of another
structure is treated like one that does not parse (nothing done there, moved aside before the step
is written, skipped by the plots); a byte-order mark is accepted; an unreadable details file costs
only its chance level. Real files."""

from __future__ import annotations

import json
import logging

import pytest
from helpers_tracking import TASK_A, make_result

from lighteval_nanotron.tracking import ResultsJsonLogger, evaluated_tasks_by_step, results_path
from lighteval_nanotron.tracking.overview_plot import chance_levels, plot_overview
from lighteval_nanotron.tracking.plot import load_history
from lighteval_nanotron.tracking.results_file import results_file_problem

WRONG = {
    "a list": [1, 2],
    "config_general a string": {"config_general": "x", "results": {}},
    "results a string": {"results": "x"},
    "scores a list": {"results": {TASK_A: [0.5]}},
    "a score a string": {"results": {TASK_A: {"acc": "high"}}},
    "max_samples_by_task a list": {"config_general": {"max_samples_by_task": [4]}, "results": {}},
    "a summary count a string": {"results": {}, "summary_tasks": {TASK_A: {"truncated": "none"}}},
    "failed_tasks a list": {"results": {}, "failed_tasks": ["x"]},
}


def test_results_file_problem_names_what_is_wrong():
    assert results_file_problem(json.loads(json.dumps(make_result().to_dict()))) is None
    assert results_file_problem({}) is None
    for name, content in WRONG.items():
        assert results_file_problem(content), name


@pytest.mark.parametrize("name", list(WRONG))
def test_a_results_file_of_another_structure_is_moved_aside_not_merged_and_not_lost(tmp_path, caplog, name):
    result = make_result()
    path = results_path(tmp_path, result)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(WRONG[name]))
    before = path.read_bytes()
    assert evaluated_tasks_by_step(tmp_path, "toy-run") == {}  # nothing done there; no crash
    assert load_history(tmp_path / "results") == {}
    with caplog.at_level(logging.WARNING, logger="lighteval_nanotron.tracking"):
        ResultsJsonLogger(tmp_path).log(result)
    (aside,) = path.parent.glob(f"{path.name}.unreadable-*")
    assert aside.read_bytes() == before  # kept, byte for byte
    assert set(json.loads(path.read_text())["results"]) == {*result.results}
    assert [r.getMessage() for r in caplog.records if "cannot be merged into" in r.getMessage()] != []
    assert 100 in evaluated_tasks_by_step(tmp_path, "toy-run")


def test_a_results_file_with_a_byte_order_mark_is_read_and_merged(tmp_path):
    first = make_result(acc=0.25)
    ResultsJsonLogger(tmp_path).log(first)
    path = results_path(tmp_path, first)
    path.write_text(path.read_text(), encoding="utf-8-sig")  # saved again by an editor that adds a BOM
    assert evaluated_tasks_by_step(tmp_path, "toy-run")[100]
    ResultsJsonLogger(tmp_path).log(make_result(acc=0.75))
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert json.loads(path.read_text())["results"][TASK_A]["acc"] == 0.75


def test_an_unreadable_details_file_costs_only_its_chance_level(tmp_path):
    from lighteval_nanotron.tracking import DetailsParquetLogger

    result = make_result()
    ResultsJsonLogger(tmp_path).log(result)
    DetailsParquetLogger(tmp_path).log(result)
    assert chance_levels(tmp_path, "toy-run")[TASK_A] == {"acc*": 0.5}
    (details,) = (tmp_path / "details").rglob("*.parquet")
    details.write_bytes(b"not parquet")
    assert chance_levels(tmp_path, "toy-run") == {}
    assert plot_overview(tmp_path, "toy-run").is_file()


def test_a_loss_log_that_cannot_be_written_never_stops_training(tmp_path, caplog):
    from lighteval_nanotron.tracking.training_loss import TrainingLossLog, read_training_loss

    log = TrainingLossLog(tmp_path, "run")
    log.append(1, 64, 2.5)
    log.path.with_suffix(".jsonl.saved").write_bytes(log.path.read_bytes())
    log.path.unlink()
    log.path.mkdir()  # in the way of every later append, as a full disk would be
    with caplog.at_level(logging.WARNING, logger="lighteval_nanotron.tracking"):
        log.append(2, 128, 2.25)
        log.append(3, 192, 2.0)
    assert len([r for r in caplog.records if "cannot be appended" in r.getMessage()]) == 1  # said once
    log.path.rmdir()
    log.path.write_bytes(b"\xef\xbb\xbf" + log.path.with_suffix(".jsonl.saved").read_bytes())  # with a BOM
    assert read_training_loss(log.path) == [(1, 2.5)]


def test_generation_parameters_of_a_sampled_task_survive_a_run_that_generates_nothing():
    """A sampled task's step, then a multiple-choice run with the default (greedy) parameters: the
    multiple-choice run merges (its parameters applied to nothing) and the file keeps the sampled
    task's; a second generating run at other parameters is refused, the file untouched."""
    from lighteval_nanotron.errors import TrackingError
    from lighteval_nanotron.tracking.results_file import merge_results

    def run(task: str, generative: bool, generation: dict) -> dict:
        content = make_result(step=10).to_dict()
        content["results"] = {task: {"acc": 0.5, "acc_stderr": 0.1}}
        content["config_tasks"] = {task: {"generative": generative}}
        content["summary_tasks"] = {task: {"effective_num_docs": 4}}
        content["config_general"]["generation_parameters"] = generation
        return content

    sampled = run("custom|gen|0", True, {"temperature": 0.5})
    merged = merge_results(sampled, run("custom|mc|0", False, {}))
    assert set(merged["results"]) >= {"custom|gen|0", "custom|mc|0"}
    assert merged["config_general"]["generation_parameters"] == {"temperature": 0.5}
    with pytest.raises(TrackingError, match=r"generation_parameters \{'temperature': 0.5\} there, \{\} now"):
        merge_results(merged, run("custom|gen2|0", True, {}))


def test_a_held_out_domain_kept_in_a_step_does_not_depend_on_generation_parameters():
    """A step with a sampled task and a held-out domain, the task scored again at another temperature:
    the domain (kept) was taken for a generating task and the merge refused."""
    import numpy as np

    from lighteval_nanotron.pipeline.held_out import HeldOutRun, PreparedHeldOut, held_out_results
    from lighteval_nanotron.requests.held_out import HeldOutLosses, HeldOutSet
    from lighteval_nanotron.tracking.results_file import merge_results

    windows = np.arange(3 * 9, dtype=np.int32).reshape(3, 9)
    held_out = HeldOutSet("web", windows, np.array([20, 21, 22]))
    out = held_out_results(
        PreparedHeldOut([held_out], [None]), [HeldOutRun(HeldOutLosses(np.array([9.0, 8, 7]), 8), 1.0)]
    )

    def run(temperature: float, with_held_out: bool) -> dict:
        content = make_result(step=10).to_dict()
        content["results"] = {"custom|gen|0": {"em": 0.5, "em_stderr": 0.1}, **(out.results if with_held_out else {})}
        content["config_tasks"] = {"custom|gen|0": {"generative": True}, **(out.config_tasks if with_held_out else {})}
        content["summary_tasks"] = {"custom|gen|0": {"effective_num_docs": 4}}
        content["config_general"]["generation_parameters"] = {"temperature": temperature}
        return content

    merged = merge_results(run(0.5, True), run(0.0, False))
    assert merged["results"]["heldout|web"] == out.results["heldout|web"]
    assert merged["config_general"]["generation_parameters"] == {"temperature": 0.0}


def test_averages_over_a_domain_scored_again_are_left_out_unless_the_run_writes_them():
    """A backfill that scores `web` again on other windows (alone) kept `heldout|_micro` / `_macro`
    computed from web's replaced scores beside the new ones; a domain added to the step keeps them."""
    import numpy as np

    from lighteval_nanotron.pipeline.held_out import HeldOutRun, PreparedHeldOut, held_out_results
    from lighteval_nanotron.requests.held_out import HeldOutLosses, HeldOutSet
    from lighteval_nanotron.tracking.results_file import merge_results

    def content(*names: str, shift: float = 0.0) -> dict:
        sets = [
            HeldOutSet(n, np.arange(27, dtype=np.int32).reshape(3, 9) + i, np.array([20, 21, 22]))
            for i, n in enumerate(names)
        ]
        runs = [HeldOutRun(HeldOutLosses(np.array([9.0, 8, 7]) + shift, 8), 1.0) for _ in names]
        out = held_out_results(PreparedHeldOut(sets, [None] * len(sets)), runs)
        written = make_result(step=10).to_dict()
        written.update(results=out.results, config_tasks=out.config_tasks, summary_tasks={})
        return written

    earlier = content("web", "code")
    averages = {"heldout|_micro", "heldout|_macro"}
    rescored = merge_results(earlier, content("web", shift=1.0))
    assert rescored["results"]["heldout|web"] != earlier["results"]["heldout|web"]
    assert not averages & (set(rescored["results"]) | set(rescored["config_tasks"]))
    assert not averages & set(rescored["config_general"]["max_samples_by_task"])
    again = merge_results(earlier, content("web", "code", shift=1.0))  # the run writes its own averages
    assert again["results"]["heldout|_micro"] != earlier["results"]["heldout|_micro"]
    added = merge_results(earlier, content("wiki"))
    assert added["results"]["heldout|_micro"] == earlier["results"]["heldout|_micro"]


def test_other_weights_beside_a_float16_evaluation_are_said_to_be_its_rounding():
    """The hook's step (training dtype, not recorded), then `eval --dtype float16` of that same
    checkpoint: float16 rounds its smallest values, so the fingerprints differ, and the refusal
    blamed another checkpoint and told to rename the model. Two fingerprints in one dtype still do."""
    from lighteval_nanotron.errors import TrackingError
    from lighteval_nanotron.tracking.results_file import merge_results

    def run(task: str, weights: str, dtype: str | None) -> dict:
        content = make_result(step=10).to_dict()
        content["results"] = {task: {"acc": 0.5, "acc_stderr": 0.1}}
        content["config_general"]["weights_fingerprint"] = weights
        if dtype is not None:
            content["config_general"]["dtype"] = dtype
        return content

    hook = run("custom|a|0", "1" * 32, None)
    with pytest.raises(TrackingError, match="float16") as refused:
        merge_results(hook, run("custom|b|0", "2" * 32, "float16"))
    assert "another checkpoint" not in str(refused.value) and "--dtype" in str(refused.value)
    with pytest.raises(TrackingError, match="another checkpoint"):
        merge_results(run("custom|a|0", "1" * 32, "float16"), run("custom|b|0", "2" * 32, "float16"))
