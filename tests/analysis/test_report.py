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
