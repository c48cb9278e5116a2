"""Runs read back from results folders, compared beyond noise, and the `report` command on them."""

import json

import numpy as np
import pytest

from lighteval_nanotron.analysis import compare_runs, load_runs
from lighteval_nanotron.analysis.compare import DIFFERENT_TASKS
from lighteval_nanotron.analysis.signal import INFORMATIVE, NOT_ABOVE_CHANCE
from lighteval_nanotron.cli.main import main
from lighteval_nanotron.pipeline.aggregates import suite_score, with_aggregates

STEPS = list(range(0, 1100, 100))
ARC, MMLU_A, MMLU_B = (
    "lighteval|arc_eng_cf:easy|0",
    "lighteval|mmlu_eng_cf:anatomy|0",
    "lighteval|mmlu_eng_cf:virology|0",
)
CONFIG = {
    "higher_is_better": {"acc": True, "gold_bpb": False, "acc_centered": True},
    "chance": {"acc": 0.25, "acc_centered": 0.0},
}


def write_run(output_dir, model, bpb_drop, seed):
    """A run evaluated every 100 steps: accuracy at chance (noise only), gold bits per byte falling
    by `bpb_drop` over the run (plus noise)."""
    rng = np.random.default_rng(seed)
    for index, step in enumerate(STEPS):
        tasks = {}
        for task in (ARC, MMLU_A, MMLU_B):
            acc = 0.25 + rng.normal(0, 0.01)
            tasks[task] = {
                "acc": acc,
                "acc_stderr": 0.03,
                "acc_centered": (acc - 0.25) / 0.75,
                "acc_centered_stderr": 0.04,
                "gold_bpb": 3.0 - bpb_drop * index / (len(STEPS) - 1) + rng.normal(0, 0.005),
                "gold_bpb_stderr": 0.05,
            }
        content = {
            "config_general": {"model_name": model, "training_step": step},
            "results": with_aggregates(tasks),
            "config_tasks": {task: CONFIG for task in tasks},
            "suite_score": suite_score(tasks),
        }
        path = output_dir / "results" / model / str(step) / "results_2025-01-01T00-00-00.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(content))
    return output_dir


def test_history_reads_entries_directions_and_chance(tmp_path):
    (run,) = load_runs(write_run(tmp_path / "a", "team/a", 1.0, seed=1)).values()
    assert run.name == "team/a"
    group = "lighteval|mmlu_eng_cf:_average|0"
    assert run.entries() == [ARC, group, "suite_score"]  # the group stands for its subjects
    assert [p.step for p in run.series[(ARC, "acc")].points] == STEPS
    assert run.series[(group, "gold_bpb")].higher_is_better is False
    assert run.series[(group, "acc")].chance == 0.25
    assert run.series[("suite_score", "acc_centered")].chance == 0.0
    assert run.series[(ARC, "gold_bpb")].chance is None


def test_run_ahead_beyond_noise_and_within_noise(tmp_path):
    fast = load_runs(write_run(tmp_path / "fast", "fast", 1.0, seed=2))["fast"]
    slow = load_runs(write_run(tmp_path / "slow", "slow", 0.3, seed=3))["slow"]
    comparisons = {(c.entry, c.metric): c for c in compare_runs([fast, slow])}
    bpb = comparisons[(ARC, "gold_bpb")]
    assert bpb.step == 1000 and bpb.leader == "fast" and bpb.difference > 0  # lower bits per byte is better
    assert bpb.separations > 2
    acc = comparisons[(ARC, "acc")]
    assert acc.leader is None and acc.note == "within noise"


def test_report_command_on_one_and_two_runs(tmp_path, capsys):
    first = write_run(tmp_path / "fast", "fast", 1.0, seed=2)
    second = write_run(tmp_path / "slow", "slow", 0.3, seed=3)
    assert main(["report", str(first)]) == 0
    out = capsys.readouterr().out

    def row(task, metric):
        (line,) = [line for line in out.splitlines() if line.startswith(f"| {task} ") and f" {metric} " in line]
        return line.rstrip(" |")

    assert row(ARC, "gold_bpb").endswith(INFORMATIVE)
    assert row(ARC, "acc").endswith(NOT_ABOVE_CHANCE)
    image = first / "plots" / "report.png"
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"Report image: {image}" in out

    output = tmp_path / "two.png"
    assert main(["report", str(first), str(second), "--output", str(output)]) == 0
    out = capsys.readouterr().out
    assert "fast ahead" in out and "within noise" in out
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_errors_are_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "no results file" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "empty"), "--snr-threshold", "nan"]) == 2
    assert capsys.readouterr().err.startswith("error: snr_threshold=nan: use a positive finite number")
    with pytest.raises(SystemExit):
        main(["report"])


def test_aggregates_over_other_tasks_are_not_compared(tmp_path):
    """A suite score or group average over other tasks in each run is another quantity: no verdict."""
    full = load_runs(write_run(tmp_path / "full", "full", 1.0, seed=2))["full"]
    fewer = tmp_path / "fewer"
    write_run(fewer, "fewer", 0.3, seed=3)
    for path in fewer.rglob("results_*.json"):  # the same run without one MMLU subject
        content = json.loads(path.read_text())
        tasks = {k: v for k, v in content["results"].items() if k in (ARC, MMLU_A)}
        content.update(results=with_aggregates(tasks), suite_score=suite_score(tasks))
        path.write_text(json.dumps(content))
    comparisons = {(c.entry, c.metric): c for c in compare_runs([full, load_runs(fewer)["fewer"]])}
    score = comparisons[("suite_score", "acc_centered")]
    assert score.note == DIFFERENT_TASKS and score.leader is None and score.difference is None
    assert comparisons[(ARC, "gold_bpb")].leader == "full"  # the tasks themselves still are
    assert ("lighteval|mmlu_eng_cf:_average|0", "gold_bpb") not in comparisons  # one subject: no group


def _with_max_samples(output_dir, max_samples_at, bpb_shift_at=lambda step: 0.0):
    """Record each step's `max_samples` (per task, as the results writer does) and shift gold_bpb."""
    for path in output_dir.rglob("results_*.json"):
        content = json.loads(path.read_text())
        step = content["config_general"]["training_step"]
        tasks = {k: v for k, v in content["results"].items() if k in (ARC, MMLU_A, MMLU_B)}
        for scores in tasks.values():
            scores["gold_bpb"] += bpb_shift_at(step)
        content["results"] = with_aggregates(tasks)
        content["config_general"]["max_samples_by_task"] = {task: max_samples_at(step) for task in tasks}
        path.write_text(json.dumps(content))
    return output_dir


def test_evaluations_over_other_docs_are_not_one_curve(tmp_path):
    """A run evaluated on 20 docs per task, then on 500: the first subset scored 0.5 bits per byte
    worse, and the analysis called the flat curve `saturated` (an improvement that was a change of
    docs); two runs at another max_samples were compared as if on the same docs."""
    from lighteval_nanotron.analysis import analyze
    from lighteval_nanotron.analysis.compare import DIFFERENT_DOCS
    from lighteval_nanotron.analysis.signal import NOISE_DOMINATED

    mixed = write_run(tmp_path / "mixed", "mixed", 0.0, seed=6)
    _with_max_samples(mixed, lambda step: 20 if step <= 500 else 500, lambda step: 0.5 if step <= 500 else 0.0)
    run = load_runs(mixed)["mixed"]
    flat = analyze(run.series[(ARC, "gold_bpb")])
    assert flat.evaluations == 5 and flat.verdict == NOISE_DOMINATED  # the 500-doc evaluations only
    assert analyze(run.series[(ARC, "gold_bpb")].up_to(500)).evaluations == 6  # the 20-doc ones at their step
    fewer = load_runs(_with_max_samples(write_run(tmp_path / "fewer", "fewer", 1.0, seed=5), lambda step: 20))
    comparisons = {(c.entry, c.metric): c for c in compare_runs([run, fewer["fewer"]])}
    for key in ((ARC, "gold_bpb"), ("suite_score", "acc_centered")):
        assert comparisons[key].note == DIFFERENT_DOCS and comparisons[key].leader is None, key


def test_an_aggregate_over_other_tasks_is_not_one_curve(tmp_path):
    """The suite score over ARC and MMLU until step 500, over ARC alone after (MMLU not evaluated):
    the jump from the change of tasks was called `saturated`, as if the run had improved."""
    from lighteval_nanotron.analysis import analyze
    from lighteval_nanotron.analysis.signal import NOISE_DOMINATED

    output = write_run(tmp_path / "run", "run", 0.0, seed=7)
    for path in output.rglob("results_*.json"):
        content = json.loads(path.read_text())
        tasks = {k: v for k, v in content["results"].items() if k in (ARC, MMLU_A, MMLU_B)}
        tasks[ARC]["acc_centered"] += 0.3  # ARC above chance, MMLU at chance: the score depends on the tasks
        if content["config_general"]["training_step"] > 500:
            tasks = {ARC: tasks[ARC]}
        content.update(results=with_aggregates(tasks), suite_score=suite_score(tasks))
        path.write_text(json.dumps(content))
    score = analyze(load_runs(output)["run"].series[("suite_score", "acc_centered")])
    assert score.evaluations == 5 and score.verdict == NOISE_DOMINATED  # the steps over ARC alone
    assert score.monotonicity is not None and score.monotonicity < 0.9


def _lighteval_written_run(output_dir, run, ter_drop, seed):
    """A run as lighteval's own results logger writes it (`results/<run>/<step>/`, its task config
    with each metric's `higher_is_better`): translation error rate (`ter`, lower is better)."""
    pytest.importorskip("lighteval")
    from lighteval_nanotron.cpu import import_nanotron

    import_nanotron()  # lighteval's logging imports nanotron.config
    from lighteval.logging.evaluation_tracker import EnhancedJSONEncoder
    from lighteval.logging.info_loggers import TaskConfigLogger
    from lighteval.metrics.metrics import Metrics
    from lighteval.tasks.lighteval_task import LightevalTaskConfig

    task = "lighteval|wmt14:fr-en|0"
    config = LightevalTaskConfig(
        name="wmt14:fr-en", prompt_function=str, hf_repo="wmt14", hf_subset="fr-en", metrics=[Metrics.ter]
    )
    configs = TaskConfigLogger(tasks_configs={task: config}).tasks_configs
    rng = np.random.default_rng(seed)
    for index, step in enumerate(STEPS):
        ter = 80.0 - ter_drop * index / (len(STEPS) - 1) + rng.normal(0, 0.2)
        content = {
            "config_general": {"model_name": f"{run}/{step}"},
            "results": {task: {"ter": ter, "ter_stderr": 1.0}, "all": {"ter": ter, "ter_stderr": 1.0}},
            "config_tasks": configs,
        }
        path = output_dir / "results" / run / str(step) / "results_2025-01-01T00-00-00.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(content, cls=EnhancedJSONEncoder))
    return output_dir, task


def test_a_results_file_lighteval_wrote_gives_each_metric_its_direction(tmp_path):
    """`ter` (lower is better in lighteval's record, not by its name) was read as higher-is-better:
    a run whose error rate fell was `monotonicity -1` and the worse run was `ahead`."""
    better, task = _lighteval_written_run(tmp_path / "better", "better", 20.0, seed=1)
    worse, _ = _lighteval_written_run(tmp_path / "worse", "worse", 0.0, seed=2)
    runs = [load_runs(better)["better"], load_runs(worse)["worse"]]
    assert runs[0].series[(task, "ter")].higher_is_better is False
    from lighteval_nanotron.analysis import analyze

    assert analyze(runs[0].series[(task, "ter")]).monotonicity > 0.9  # improving
    (comparison,) = compare_runs(runs)
    assert comparison.leader == "better" and comparison.difference > 0


def _with_examples_hash(output_dir, hash_at, prompts_hash_at=lambda task, step: "prompts"):
    """Record each task's `summary_tasks[task].hashes`: `hash_examples` (`hash_at(task, step)`) and
    `hash_full_prompts` (`prompts_hash_at(task, step)`)."""
    for path in output_dir.rglob("results_*.json"):
        content = json.loads(path.read_text())
        step = content["config_general"]["training_step"]
        content["summary_tasks"] = {
            task: {"hashes": {"hash_examples": hash_at(task, step), "hash_full_prompts": prompts_hash_at(task, step)}}
            for task in (ARC, MMLU_A, MMLU_B)
        }
        path.write_text(json.dumps(content))
    return output_dir


def test_the_same_max_samples_over_another_data_source_is_other_docs(tmp_path):
    """Run A's ARC docs from the shipped 50-row slice, run B's from the Hub's full split, both at
    max_samples None: B was `ahead` of A on other docs; a run whose source changed was one curve."""
    from lighteval_nanotron.analysis import analyze
    from lighteval_nanotron.analysis.compare import DIFFERENT_DOCS

    slice_run = _with_examples_hash(write_run(tmp_path / "a", "a", 0.3, seed=3), lambda task, step: "slice")
    hub_run = _with_examples_hash(
        write_run(tmp_path / "b", "b", 1.0, seed=2), lambda task, step: "hub" if task == ARC else "slice"
    )
    runs = [load_runs(slice_run)["a"], load_runs(hub_run)["b"]]
    comparisons = {(c.entry, c.metric): c for c in compare_runs(runs)}
    assert comparisons[(ARC, "gold_bpb")].note == DIFFERENT_DOCS and comparisons[(ARC, "gold_bpb")].leader is None
    assert comparisons[("lighteval|mmlu_eng_cf:_average|0", "gold_bpb")].leader == "b"  # the same docs there
    assert comparisons[("suite_score", "acc_centered")].note == DIFFERENT_DOCS  # ARC is one of its benchmarks
    changed = _with_examples_hash(
        write_run(tmp_path / "c", "c", 1.0, seed=4), lambda task, step: "hub" if step > 500 else "slice"
    )
    assert analyze(load_runs(changed)["c"].series[(ARC, "gold_bpb")]).evaluations == 5


def test_runs_evaluated_at_other_steps_are_compared_at_the_same_step():
    """One curve, gold bits per byte falling 1 per 1000 steps, evaluated every 100 steps in run a
    and every 150 in run b: at the common step 1000, b's trend was read at its evaluation at 900,
    0.1 worse, and `a ahead` came from the 100 steps of training between them."""
    from lighteval_nanotron.analysis.history import RunHistory
    from lighteval_nanotron.analysis.report_table import comparison_table

    rng = np.random.default_rng(0)

    def run(name, steps):
        history = RunHistory(name)
        for step in steps:
            scores = {"gold_bpb": 3.0 - step / 1000 + rng.normal(0, 0.005), "gold_bpb_stderr": 0.05}
            history.add(step, {"results": {ARC: scores}, "config_tasks": {ARC: CONFIG}})
        return history

    (comparison,) = compare_runs([run("a", range(0, 1001, 100)), run("b", range(0, 1051, 150))])
    assert comparison.step == 1000 and comparison.b.step == 900
    assert comparison.note == "within noise" and abs(comparison.difference) < 0.02
    row = comparison_table([comparison]).splitlines()[2].split("|")  # the task name holds "|" too: from the end
    assert float(row[-7]) == pytest.approx(2.0, abs=0.02) and float(row[-5]) == pytest.approx(2.0, abs=0.02)


def test_the_chance_level_is_that_of_the_latest_evaluations_docs(tmp_path):
    """Step 200 over 20 docs (chance 0.25), step 1000 over 50 docs with more two-choice rows (chance
    0.30): read in file order ("1000/" before "200/"), the chance was step 200's, not that of the docs
    the analysis is over."""
    for step, samples, chance in ((200, 20, 0.25), (1000, 50, 0.30)):
        content = {
            "config_general": {"model_name": "m", "training_step": step, "max_samples_by_task": {ARC: samples}},
            "results": {ARC: {"acc": 0.4, "acc_stderr": 0.05}},
            "config_tasks": {ARC: {"higher_is_better": {"acc": True}, "chance": {"acc": chance}}},
        }
        path = tmp_path / "results" / "m" / str(step) / "results_2025-01-01T00-00-00.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(content))
    assert load_runs(tmp_path)["m"].series[(ARC, "acc")].chance == 0.30


def test_group_averages_of_lighteval_0_12_names_stand_for_their_tasks(tmp_path):
    """lighteval 0.12.1 and later name tasks without a suite (`mmlu:anatomy|5`) and write
    `mmlu:_average|5`: the group had no tasks to stand for, so a run's average over three subjects
    was compared with another's over two."""
    from lighteval_nanotron.analysis.compare import DIFFERENT_TASKS

    def run(name, subjects, shift):
        rng = np.random.default_rng(len(subjects))
        for step in STEPS:
            tasks = {f"mmlu:{s}|5": {"acc": 0.25 + shift + rng.normal(0, 0.01), "acc_stderr": 0.03} for s in subjects}
            group = {"acc": sum(t["acc"] for t in tasks.values()) / len(tasks), "acc_stderr": 0.02}
            results = {**tasks, "mmlu:_average|5": group}
            content = {"config_general": {"model_name": f"{name}/{step}"}, "results": results}
            path = tmp_path / name / "results" / name / str(step) / "results_2025-01-01T00-00-00.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(content))
        return load_runs(tmp_path / name)[name]

    three = run("three", ["anatomy", "virology", "astronomy"], 0.2)
    two = run("two", ["anatomy", "virology"], 0.0)
    assert three.entries() == ["mmlu:_average|5"]  # the group stands for its subjects
    comparisons = {(c.entry, c.metric): c for c in compare_runs([three, two])}
    assert comparisons[("mmlu:_average|5", "acc")].note == DIFFERENT_TASKS


def test_the_same_docs_with_other_few_shot_examples_are_other_prompts(tmp_path):
    """Both runs on the same docs, run b with other few-shot examples (another draw), a chat
    template or a system prompt: its prompts differ, and `b ahead` compared two formulations."""
    from lighteval_nanotron.analysis.compare import DIFFERENT_DOCS

    same = lambda task, step: "docs"  # noqa: E731
    a = _with_examples_hash(write_run(tmp_path / "a", "a", 0.3, seed=3), same)
    b = _with_examples_hash(write_run(tmp_path / "b", "b", 1.0, seed=2), same, lambda task, step: "other few-shots")
    comparisons = {(c.entry, c.metric): c for c in compare_runs([load_runs(a)["a"], load_runs(b)["b"]])}
    assert comparisons[(ARC, "gold_bpb")].note == DIFFERENT_DOCS and comparisons[(ARC, "gold_bpb")].leader is None
    again = _with_examples_hash(write_run(tmp_path / "c", "c", 1.0, seed=2), same)
    assert compare_runs([load_runs(a)["a"], load_runs(again)["c"]])[0].note != DIFFERENT_DOCS  # the same prompts


@pytest.fixture(scope="module")
def held_out_sets(tmp_path_factory):
    """Real held-out sets of the tests' text: `web` at two sequence lengths (other windows), `code`, `wiki`."""
    from lighteval_nanotron.heldout import HeldOutSpec, build_held_out_set
    from tests.helpers.tiny_model import VOCAB_SIZE, tiny_tokenizer
    from tests.models.held_out_cases import write_text_jsonl

    folder = tmp_path_factory.mktemp("held_out")
    web, code = (write_text_jsonl(folder / f"{name}.jsonl", seed=seed) for name, seed in (("web", 0), ("code", 1)))

    def build(name, source, length):
        return build_held_out_set(HeldOutSpec(name, str(source), 8 * length), tiny_tokenizer(), length, VOCAB_SIZE, 64)

    return {
        "short": build("web", web, 16),
        "long": build("web", web, 32),
        "code": build("code", code, 16),
        "wiki": build("wiki", code, 32),
    }


def _held_out_content(model, step, sets, shifts, rng):
    """One evaluation's results of the held-out `sets`, each domain's loss flat plus its shift, as the
    pipeline records them."""
    from lighteval_nanotron.pipeline.held_out import HeldOutRun, PreparedHeldOut, held_out_results
    from lighteval_nanotron.requests.held_out import HeldOutLosses

    prepared = PreparedHeldOut(list(sets), [None] * len(sets))
    runs = []
    for held_out, shift in zip(prepared.sets, shifts):
        loss = 3.0 + shift + rng.normal(0, 0.01, len(held_out.windows))
        runs.append(HeldOutRun(HeldOutLosses(loss * held_out.sequence_length, held_out.sequence_length), 1.0))
    out = held_out_results(prepared, runs)
    general = {"model_name": model, "training_step": step}
    return {"config_general": general, "results": out.results, "config_tasks": out.config_tasks}


def _held_out_run(output_dir, model, sets, web_at, shift_at, seed):
    """A run whose held-out domains `web` and `code` are flat (noise only); `web` scored on the set
    `web_at(step)`, its loss shifted by `shift_at(step)`."""
    rng = np.random.default_rng(seed)
    for step in STEPS:
        content = _held_out_content(model, step, [sets[web_at(step)], sets["code"]], [shift_at(step), 0.0], rng)
        path = output_dir / "results" / model / str(step) / "results_2025-01-01T00-00-00.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(content))
    return load_runs(output_dir)[model]


def test_held_out_evaluations_over_other_windows_are_not_one_curve(tmp_path, held_out_sets):
    """The held-out set changed at step 500 (here its sequence length; a budget, seed or file alike):
    `web`'s loss was 0.3 higher on the first windows, and the flat curve was called informative, its
    micro and macro averages too; two runs on other windows were compared as if on the same ones. An
    average over domains is labelled by its own domains, also when a backfill adds one to the file."""
    from lighteval_nanotron.analysis import analyze
    from lighteval_nanotron.analysis.compare import DIFFERENT_DOCS
    from lighteval_nanotron.analysis.history import RunHistory
    from lighteval_nanotron.analysis.signal import NOISE_DOMINATED
    from lighteval_nanotron.tracking.results_file import merge_results

    sets = held_out_sets
    assert sets["short"].description["windows_sha256"] != sets["long"].description["windows_sha256"]
    changed = _held_out_run(
        tmp_path / "a", "a", sets, lambda s: "short" if s < 500 else "long", lambda s: 0.3 * (s < 500), 1
    )
    for entry in ("heldout|web", "heldout|_micro", "heldout|_macro"):
        signal = analyze(changed.series[(entry, "loss")])
        assert signal.evaluations == 6 and signal.verdict == NOISE_DOMINATED, entry
    assert analyze(changed.series[("heldout|code", "loss")]).evaluations == len(STEPS)  # its windows never changed
    other = _held_out_run(tmp_path / "b", "b", sets, lambda s: "short", lambda s: 0.3, 2)
    comparisons = {(c.entry, c.metric): c for c in compare_runs([changed, other])}
    assert comparisons[("heldout|web", "loss")].note == DIFFERENT_DOCS
    assert comparisons[("heldout|web", "loss")].leader is None
    assert comparisons[("heldout|code", "loss")].note != DIFFERENT_DOCS
    rng = np.random.default_rng(3)
    two = _held_out_content("c", 100, [sets["short"], sets["code"]], [0.0, 0.0], rng)
    backfilled = merge_results(two, _held_out_content("c", 100, [sets["wiki"]], [0.0], rng))
    assert backfilled["config_tasks"]["heldout|_micro"]["domains"] == ["heldout|web", "heldout|code"]
    three = _held_out_content("c", 200, [sets["short"], sets["code"], sets["wiki"]], [0.0] * 3, rng)
    history = RunHistory("c")
    history.add(100, backfilled)
    history.add(200, three)
    assert len(history.series[("heldout|_micro", "loss")].over_latest_docs().points) == 1
