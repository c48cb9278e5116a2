"""Aggregates over tasks: lighteval's group averages (against lighteval itself) and the centered
suite score (by hand, docs with different numbers of choices)."""

import math

import pytest

from lighteval_nanotron.metrics import Metrics, aggregate_task_metrics
from lighteval_nanotron.metrics.chance import centered_metrics
from lighteval_nanotron.pipeline.aggregates import group_averages, suite_score, task_groups, with_aggregates
from lighteval_nanotron.requests import Doc, ModelResponse
from lighteval_nanotron.tracking.results_file import merge_results

TASKS = {
    "leaderboard|mmlu:anatomy|5": {"acc": 0.25, "acc_stderr": 0.03},
    "leaderboard|mmlu:astronomy|5": {"acc": 0.5, "acc_stderr": 0.04},
    "leaderboard|mmlu:virology|5": {"acc": 0.75, "acc_stderr": 0.06},
    "lighteval|arc:easy|0": {"acc": 0.6, "acc_stderr": 0.02, "acc_norm": 0.55, "acc_norm_stderr": 0.02},
    "lighteval|arc:challenge|0": {"acc": 0.3, "acc_stderr": 0.03, "acc_norm": 0.35, "acc_norm_stderr": 0.03},
    "leaderboard|mmlu:anatomy|0": {"acc": 0.2, "acc_stderr": 0.05},  # alone at k=0: no group
    "lighteval|piqa|0": {"acc": 0.7, "acc_stderr": 0.01},
}


def test_group_averages_by_hand():
    groups = task_groups(TASKS)
    assert groups == {
        "leaderboard|mmlu:_average|5": [
            "leaderboard|mmlu:anatomy|5",
            "leaderboard|mmlu:astronomy|5",
            "leaderboard|mmlu:virology|5",
        ],
        "lighteval|arc:_average|0": ["lighteval|arc:easy|0", "lighteval|arc:challenge|0"],
    }
    averages = group_averages(TASKS)
    assert averages["leaderboard|mmlu:_average|5"] == {
        "acc": pytest.approx(0.5),
        "acc_stderr": pytest.approx(math.sqrt(0.03**2 + 0.04**2 + 0.06**2) / 3),
    }
    assert averages["lighteval|arc:_average|0"]["acc_norm"] == pytest.approx(0.45)
    results = with_aggregates(TASKS)
    assert list(results)[-3:] == ["leaderboard|mmlu:_average|5", "lighteval|arc:_average|0", "all"]
    assert results["all"]["acc"] == pytest.approx(sum(t["acc"] for t in TASKS.values()) / len(TASKS))  # tasks only


def _lighteval_aggregated(task_results):
    """lighteval's own MetricsLogger on the same per-task numbers (its key format for its version)."""
    pytest.importorskip("lighteval")
    from lighteval_nanotron.cpu import import_nanotron

    import_nanotron()  # lighteval's logging imports nanotron.config
    from lighteval.logging.info_loggers import MetricsLogger

    logger = MetricsLogger()
    for task, scores in task_results.items():
        logger.metric_aggregated[task].update(scores)
    logger.aggregate(task_dict={})
    return {key: dict(value) for key, value in logger.metric_aggregated.items()}


def _lighteval_key(key: str, suites: bool) -> str:
    """lighteval 0.12.1+ keys drop the suite: `suite|task|k` -> `task|k` (here the suite stays)."""
    return key if suites else key.split("|", 1)[1]


def test_group_averages_equal_lighteval_on_the_same_numbers():
    pytest.importorskip("lighteval")
    from lighteval_nanotron.tasks.lighteval_adapter import import_lighteval

    suites = not import_lighteval().suiteless  # told by lighteval's task config class, as the adapter does
    tasks = {key: value for key, value in TASKS.items() if key != "leaderboard|mmlu:anatomy|0"}
    theirs = _lighteval_aggregated({_lighteval_key(k, suites): v for k, v in tasks.items()})
    ours = with_aggregates(tasks)
    groups = task_groups(tasks)
    for key, members in groups.items():
        expected = theirs[_lighteval_key(key, suites)]
        assert set(ours[key]) == set(expected)
        for metric, value in ours[key].items():
            if metric.endswith("_stderr"):  # lighteval averages the standard errors (ours: of the average)
                assert expected[metric] == pytest.approx(sum(tasks[m][metric] for m in members) / len(members))
            else:
                assert value == expected[metric]
    assert {k for k in theirs if ":_average|" in k} == {_lighteval_key(k, suites) for k in groups}
    for metric in ("acc", "acc_norm"):  # `all`: the plain mean over the tasks, as lighteval's
        assert ours["all"][metric] == pytest.approx(theirs["all"][metric])


def _doc(n_choices, gold):
    return Doc(query="Q:", choices=[f" c{i}" for i in range(n_choices)], gold_index=gold, id="0", task_name="t")


def _response(best, n_choices):
    return ModelResponse(logprobs=[-1.0 if i == best else -2.0 for i in range(n_choices)])


def test_centered_suite_score_with_different_numbers_of_choices():
    acc = Metrics.loglikelihood_acc
    metrics = [acc, *centered_metrics([acc], [_doc(2, 0)])]

    def task(cases):
        values = []
        for n, gold, best in cases:
            doc, response = _doc(n, gold), _response(best, n)
            values.append({k: v for m in metrics for k, v in m.compute_sample(doc, response).items()})
        return aggregate_task_metrics(metrics, values)

    # task A: right on 2 choices (centered 1), wrong on 4 (-1/3), right on 5 (1): mean 5/9
    a = task([(2, 0, 0), (4, 1, 0), (5, 2, 2)])
    assert a["acc"] == pytest.approx(2 / 3)
    centered_a = [1.0, -1 / 3, 1.0]
    assert a["acc_centered"] == pytest.approx(5 / 9)
    assert a["acc_centered_stderr"] == pytest.approx(_sem(centered_a))
    # task B (a group of two MMLU-like subtasks, 4 choices): wrong, wrong -> -1/3 each; right, wrong -> 1, -1/3
    b1 = task([(4, 0, 1), (4, 0, 2)])
    b2 = task([(4, 3, 3), (4, 0, 1)])
    assert b1["acc_centered"] == pytest.approx(-1 / 3) and b1["acc_centered_stderr"] == 0.0
    assert b2["acc_centered"] == pytest.approx(1 / 3)
    results = {"custom|a|0": a, "custom|b:x|0": b1, "custom|b:y|0": b2}
    score = suite_score(results)
    unit_b = (-1 / 3 + 1 / 3) / 2  # the group counts once, as the mean of its tasks
    assert score["acc_centered"] == pytest.approx((5 / 9 + unit_b) / 2)
    unit_b_stderr = math.sqrt(b1["acc_centered_stderr"] ** 2 + b2["acc_centered_stderr"] ** 2) / 2
    assert score["acc_centered_stderr"] == pytest.approx(
        math.sqrt(a["acc_centered_stderr"] ** 2 + unit_b_stderr**2) / 2
    )
    assert set(score) == {"acc_centered", "acc_centered_stderr"}  # only centered metrics
    # the same from a results section that already holds aggregates
    assert suite_score(with_aggregates(results)) == score


def _sem(values):
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) / math.sqrt(len(values))


def test_merging_a_results_file_recomputes_groups_and_suite_score():
    earlier = {"results": with_aggregates({"custom|b:x|0": {"acc_centered": 0.2, "acc_centered_stderr": 0.1}})}
    assert "custom|b:_average|0" not in earlier["results"]  # one subtask: no group yet
    new = {"results": with_aggregates({"custom|b:y|0": {"acc_centered": 0.4, "acc_centered_stderr": 0.1}})}
    merged = merge_results({**earlier, "config_general": {}}, {**new, "config_general": {}})
    assert merged["results"]["custom|b:_average|0"]["acc_centered"] == pytest.approx(0.3)
    assert merged["suite_score"]["acc_centered"] == pytest.approx(0.3)
    assert merged["config_general"]["max_samples_by_task"] == {"custom|b:x|0": None, "custom|b:y|0": None}


def test_a_failed_task_leaves_out_every_aggregate_it_belongs_to():
    """MMLU's virology failed: its group's average over the other subjects, `all` and the suite
    score were written under their names (a mean over other tasks, with a jump in every curve)."""
    failed = {"leaderboard|mmlu:virology|5": "its metric raised", "heldout|web": "a held-out domain"}
    tasks = {name: scores for name, scores in TASKS.items() if name not in failed}
    written = with_aggregates(tasks, failed)
    assert "leaderboard|mmlu:_average|5" not in written and "all" not in written
    assert written["lighteval|arc:_average|0"] == group_averages(tasks)["lighteval|arc:_average|0"]  # complete
    assert {name for name in written if name in TASKS} == set(tasks)  # the tasks' own results are kept
    centered = {"custom|a|0": {"acc_centered": 0.2, "acc_centered_stderr": 0.1}}
    assert suite_score(centered, failed) == {} and suite_score(centered, ["heldout|web"]) != {}
    assert "all" in with_aggregates(tasks, ["heldout|web"])  # a held-out domain is in no aggregate
    # a step written with the failure, then merged with another task's results: still left out
    earlier = {"results": written, "failed_tasks": failed, "config_general": {}}
    merged = merge_results(earlier, {"results": with_aggregates(centered), "config_general": {}})
    assert "leaderboard|mmlu:_average|5" not in merged["results"] and "suite_score" not in merged
    assert "all" not in merged["results"]


def test_a_task_failing_again_keeps_its_score_and_the_steps_aggregates():
    """A step complete on disk, then a run evaluating virology again where it fails: its earlier
    score is kept (measured on the same weights and settings), so the step's group average, `all`
    and suite score stay; they were removed, as if virology had no score at that step."""
    centered = {name: {**scores, "acc_centered": scores["acc"] - 0.25} for name, scores in TASKS.items()}
    earlier = {"results": with_aggregates(centered), "suite_score": suite_score(centered), "config_general": {}}
    failed = {"leaderboard|mmlu:virology|5": "its metric raised"}
    others = {name: scores for name, scores in centered.items() if name not in failed}
    new = {"results": with_aggregates(others, failed), "failed_tasks": failed, "config_general": {}}
    merged = merge_results(earlier, new)
    assert merged["results"]["leaderboard|mmlu:virology|5"] == centered["leaderboard|mmlu:virology|5"]
    assert merged["failed_tasks"] == failed  # the failure is still recorded
    for aggregate in ("leaderboard|mmlu:_average|5", "all"):
        assert merged["results"][aggregate] == pytest.approx(earlier["results"][aggregate]), aggregate
    assert merged["suite_score"]["acc_centered"] == pytest.approx(earlier["suite_score"]["acc_centered"])


def test_a_failed_held_out_domain_leaves_out_the_averages_over_domains():
    """Of three domains, `code` got a NaN loss: `_micro` and `_macro` were written over the other two."""
    import numpy as np

    from lighteval_nanotron.pipeline.held_out import MACRO_KEY, MICRO_KEY, HeldOutRun, PreparedHeldOut, held_out_results
    from lighteval_nanotron.requests.held_out import HeldOutLosses, HeldOutSet

    def domain(name):
        return HeldOutSet(name, np.zeros((2, 5), dtype=np.int32), np.full(2, 12, dtype=np.int64))

    sets = [domain("web"), domain("code"), domain("books")]
    losses = {"web": [8.0, 9.0], "code": [7.0, math.nan], "books": [6.0, 6.5]}
    runs = [HeldOutRun(HeldOutLosses(np.array(losses[s.name]), 4), 1.0) for s in sets]
    out = held_out_results(PreparedHeldOut(sets=sets), runs)
    assert set(out.failed) == {"heldout|code"}
    assert set(out.results) == {"heldout|web", "heldout|books"}  # the domains, no averages over two of three
    complete = held_out_results(PreparedHeldOut(sets=sets[::2]), runs[::2])
    assert {MICRO_KEY, MACRO_KEY} <= set(complete.results)
