"""`lighteval-nanotron eval` never reports a wrong-looking number as a real one, never writes
outside its output folder, and a backfill adds new tasks to evaluated steps without losing any."""

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import safe_open
from safetensors.torch import save_file

from lighteval_nanotron.tracking import results_files_by_step
from tests.helpers.distributed import run_distributed

ARC, MMLU = "lighteval|arc:easy|0", "leaderboard|mmlu:abstract_algebra|0"
NORM = Path("model/model/final_layer_norm/pp_block/model_weight.safetensors")


def _cli(argv_list: list) -> list:
    """run_distributed worker: the CLI's main for each argv; (rc, the `error:` lines) each."""
    from lighteval_nanotron.cli.main import main

    outcomes = []
    for argv in argv_list:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            rc = main(argv)
        outcomes.append((rc, [line for line in stderr.getvalue().splitlines() if line.startswith("error: ")]))
    return outcomes


def _argv(checkpoint: Path, output_dir: Path, tasks: str, *extra: str) -> list:
    return ["eval", str(checkpoint), "--cpu", "--tasks", tasks, "--max-samples", "2", "--data-dir", "bundled",
            "--output-dir", str(output_dir), "--loggers", "json", "details", *extra]  # fmt: skip


def _fill(checkpoint: Path, value: float) -> None:
    with safe_open(str(checkpoint / NORM), framework="pt") as handle:
        metadata, tensor = handle.metadata(), handle.get_tensor("data")
    save_file({"data": torch.full_like(tensor, value)}, str(checkpoint / NORM), metadata=metadata)


def _strict(path: Path) -> dict:
    def refuse(constant: str) -> None:
        raise ValueError(f"non-strict JSON constant {constant} in {path}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_non_finite_weights_and_hostile_names(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    nan, inf, hostile = tmp_path / "ckpt" / "nan", tmp_path / "ckpt" / "inf", tmp_path / "ckpt" / "hostile"
    for folder in (nan, inf, hostile):
        shutil.copytree(checkpoint, folder)
    # finite weights whose forward overflows float32 (NaN/inf weights are refused at load: test_weight_content)
    _fill(nan, 3.4e38)
    _fill(inf, -3.4e38)
    config = yaml.safe_load((hostile / "config.yaml").read_text())
    config["general"].update(project="..", run="../../../escaped_run")  # an untrusted checkpoint's config
    (hostile / "config.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "deep" / "er" / "out"
    outcomes = run_distributed(
        _cli,
        1,
        [
            _argv(nan, out, f"{ARC},{MMLU}", "--model-name", "nan"),
            _argv(inf, out, ARC, "--model-name", "inf"),
            _argv(hostile, out, ARC),
            _argv(checkpoint, out, ARC, "--model-name", "../../../../escaped_cli"),
        ],
        timeout=300,
    )[0]
    (rc, errors), (inf_rc, inf_errors) = outcomes[:2]
    assert rc == 2 and len(errors) == 1, errors
    assert f"{ARC}: 2 of 2 docs got non-finite" in errors[0] and f"{MMLU}: 2 of 2 docs got non-finite" in errors[0]
    assert inf_rc == 2 and f"{ARC}: 2 of 2 docs got non-finite" in inf_errors[0]
    (results,) = (out / "results" / "nan").rglob("results_*.json")
    content = _strict(results)
    assert set(content["failed_tasks"]) == {ARC, MMLU} and content["results"] == {}
    assert not (out / "details" / "nan").exists() or not any((out / "details" / "nan").rglob("*.parquet"))

    assert outcomes[2][0] == outcomes[3][0] == 0, outcomes
    written = [path for path in tmp_path.rglob("*") if path.is_file() and (tmp_path / "ckpt") not in path.parents]
    assert written and all(out in path.parents for path in written), written
    assert list((out / "results" / "__" / "__" / "__" / "__" / "escaped_run").rglob("results_*.json"))
    assert list((out / "results" / "__" / "__" / "__" / "__" / "escaped_cli").rglob("results_*.json"))


def _backfill(runs: list, output_dir: str, task_lists: list) -> list:
    """run_distributed worker (2 ranks): one backfill per task list, each rank given its own
    checkpoints folder (`runs[rank]`); (evaluated steps, skipped steps) of each backfill."""
    import torch.distributed as dist

    from lighteval_nanotron.checkpoint_eval import CheckpointEvalConfig, evaluate_checkpoints

    reports = []
    for tasks in task_lists:
        config = CheckpointEvalConfig(
            tasks=tasks, checkpoints_dir=runs[dist.get_rank()], dp=2, cpu=True, max_samples=2,
            data_dirs=["bundled"], output_dir=output_dir, model_name="tiny", loggers=["json"],
        )  # fmt: skip
        report = evaluate_checkpoints(config)
        reports.append(([r.step for r in report.results], report.skipped_steps))
    return reports


def test_backfill_adds_new_tasks_to_done_steps_on_one_checkpoint_list(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    seen_by_rank0, seen_by_rank1 = tmp_path / "run", tmp_path / "run_later"
    for step in (10, 20):
        shutil.copytree(checkpoint, seen_by_rank0 / str(step))
    shutil.copytree(seen_by_rank0, seen_by_rank1)
    shutil.copytree(checkpoint, seen_by_rank1 / "30")  # as if saved while rank 1 listed the folder
    out = tmp_path / "out"
    folder = out / "results" / "tiny"

    runs = [str(seen_by_rank0), str(seen_by_rank1)]
    first = run_distributed(_backfill, 2, runs, str(out), [ARC], timeout=300)
    assert first[0] == [([10, 20], [])] and first[1] == [([], [])]  # rank 0's list, on both ranks
    files = results_files_by_step(out, "tiny")
    before = {step: _strict(files[step]) for step in (10, 20)}
    again = run_distributed(_backfill, 2, runs, str(out), [f"{ARC},{MMLU}", f"{ARC},{MMLU}"], timeout=300)
    assert again[0] == [([10, 20], []), ([], [10, 20])]
    assert sorted(p.name for p in folder.iterdir()) == ["10", "20"]
    assert results_files_by_step(out, "tiny") == files  # each step keeps its one file
    assert all(len(list((folder / str(step)).iterdir())) == 1 for step in (10, 20))
    for step in (10, 20):
        merged = _strict(files[step])
        assert merged["results"][ARC] == before[step]["results"][ARC]  # not re-evaluated, not lost
        assert set(merged["results"]) == {ARC, MMLU, "all"}
        assert merged["config_general"]["max_samples_by_task"] == {ARC: 2, MMLU: 2}


def test_a_results_file_of_another_structure_is_moved_aside_on_every_rank(tiny_converted, tmp_path):
    """Valid JSON that is not a results dict once crashed every later backfill on every rank."""
    _, checkpoint = tiny_converted
    shutil.copytree(checkpoint, tmp_path / "run" / "10")
    step = tmp_path / "out" / "results" / "tiny" / "10"
    step.mkdir(parents=True)
    wrong = step / "results_2024-01-01T00-00-00.json"
    wrong.write_text(json.dumps({"config_general": "edited by hand", "results": {ARC: {"acc": 1.0}}}))
    before = wrong.read_bytes()
    runs = [str(tmp_path / "run")] * 2
    outcome = run_distributed(_backfill, 2, runs, str(tmp_path / "out"), [ARC], timeout=300)
    assert outcome[0] == [([10], [])] and outcome[1] == [([], [])]  # nothing counted done: evaluated
    (aside,) = step.glob("results_2024-01-01T00-00-00.json.unreadable-*")
    assert aside.read_bytes() == before
    assert set(_strict(wrong)["results"]) == {ARC, "all"} and len(list(step.iterdir())) == 2


def test_a_step_scored_with_other_settings_is_not_merged_into_on_every_rank(tiny_converted, tmp_path):
    """A step's file once took a later run's tasks under that run's `config_general`: PIQA with a
    system prompt merged beside ARC without one, and the file said neither task had one. Generation
    parameters count only where a kept task generates: PIQA at another temperature merges (it
    generates nothing), a second TriviaQA at another temperature beside the first does not."""
    from lighteval_nanotron.errors import TrackingError
    from lighteval_nanotron.tracking.results_file import merge_results

    _, checkpoint = tiny_converted
    shutil.copytree(checkpoint, tmp_path / "10")
    out, piqa, trivia = tmp_path / "out", "lighteval|piqa|0", "lighteval|triviaqa|0"
    runs = [
        (f"{ARC},{trivia}",),
        (piqa, "--system-prompt", "Be brief."),
        ("lighteval|triviaqa|1", "--temperature", "0.5"),
        (piqa, "--temperature", "0.5"),
        (piqa, "--dtype", "bfloat16"),
        (piqa,),
    ]
    argv = [_argv(tmp_path / "10", out, tasks, "--model-name", "tiny", "--dp", "2", *extra) for tasks, *extra in runs]
    outcomes = run_distributed(_cli, 2, argv, timeout=300)
    assert outcomes[1] == [(0, []), (2, []), (2, []), (0, []), (2, []), (0, [])]  # the same on both ranks
    assert [len(lines) for _, lines in outcomes[0]] == [0, 1, 1, 0, 1, 0]  # one line, from rank 0
    kept = f"{ARC}, {trivia}"
    for (_, (line,)), refused in zip([outcomes[0][i] for i in (1, 2, 4)], [
            f"holds {kept} scored with other settings (system_prompt None there, 'Be brief.' now)",
            f"holds {kept} scored with other settings (generation_parameters {{}} there, "
            "{'temperature': 0.5} now)",
            f"holds {kept} scored with other settings (dtype 'float32' there, 'bfloat16' now)"]):  # fmt: skip
        assert refused in line, line
    written = _strict(next((out / "results" / "tiny" / "10").glob("results_*.json")))
    assert set(written["results"]) == {ARC, piqa, trivia, "all"} and written["config_general"]["system_prompt"] is None
    assert written["config_general"]["generation_parameters"] == {}  # TriviaQA's, kept through the PIQA runs
    assert [written["config_tasks"][task]["generative"] for task in (ARC, piqa, trivia)] == [False, False, True]
    general = written["config_general"]
    earlier = {
        **written,
        "config_general": {**general, "identity": {**general["identity"], "system_prompt": "Be brief."}},
    }
    with pytest.raises(TrackingError, match="system_prompt 'Be brief.' there, None now"):  # the hook's writes
        merge_results(earlier, {"config_general": written["config_general"], "results": {ARC: {"acc": 1.0}}})


def test_another_checkpoint_under_the_same_model_name_and_step_is_not_merged(
    tiny_converted, tiny_converted_other, tmp_path
):
    """Two checkpoints evaluated under one model name and step once shared a results file: the
    second run's tasks sat beside the first's, as one model's. The weights now name themselves
    (`models.weights_fingerprint`): the same checkpoint at TP2 and at TP1 (DP2), in float32 and
    bfloat16, merges; another checkpoint with the same step folder is refused, the file untouched."""
    _, checkpoint = tiny_converted
    _, other = tiny_converted_other
    shutil.copytree(checkpoint, tmp_path / "run" / "10")
    shutil.copytree(other, tmp_path / "other_run" / "10")
    out, piqa = tmp_path / "out", "lighteval|piqa|0"
    argv = [
        _argv(tmp_path / "run" / "10", out, ARC, "--model-name", "tiny", "--tp", "2"),
        _argv(tmp_path / "run" / "10", out, MMLU, "--model-name", "tiny", "--dp", "2"),
        _argv(tmp_path / "other_run" / "10", out, piqa, "--model-name", "tiny", "--dp", "2"),
    ]
    outcomes = run_distributed(_cli, 2, argv, timeout=300)
    assert [rc for rc, _ in outcomes[1]] == [0, 0, 2]
    (line,) = outcomes[0][2][1]
    assert f"holds {MMLU}, {ARC} measured on other weights (weights_fingerprint '" in line, line
    assert "--model-name" in line
    (written,) = (out / "results" / "tiny" / "10").glob("results_*.json")
    before = written.read_bytes()
    content = _strict(written)
    assert set(content["results"]) == {ARC, MMLU, "all"}
    fingerprint = content["config_general"]["weights_fingerprint"]
    assert len(fingerprint) == 32 and fingerprint != "0" * 32

    again = [
        _argv(tmp_path / "run" / "10", out, piqa, "--model-name", "tiny", "--dp", "2", "--dtype", "bfloat16"),
        _argv(tmp_path / "other_run" / "10", out, piqa, "--model-name", "tiny", "--dp", "2"),
    ]
    outcomes = run_distributed(_cli, 2, again, timeout=300)
    assert [rc for rc, _ in outcomes[1]] == [2, 2]  # bfloat16: refused for its dtype, not for its weights
    assert "dtype 'float32' there, 'bfloat16' now" in outcomes[0][0][1][0]
    assert "weights_fingerprint" not in outcomes[0][0][1][0]
    assert written.read_bytes() == before


def test_one_step_file_never_mixes_identities(tiny_converted, tmp_path):
    """A step's results file holds one identity: another value of a score-changing option (a), the
    same option at a backfill of a step already evaluated without it (b), or another checkpoint of
    the step evaluated on the same tasks (c) is refused with one `error:` line, the file untouched."""
    _, checkpoint = tiny_converted
    shutil.copytree(checkpoint, tmp_path / "run" / "10")
    shutil.copytree(checkpoint, tmp_path / "edited" / "10")
    _fill(tmp_path / "edited" / "10", 0.5)  # one tensor changed: another checkpoint of step 10
    out, piqa = tmp_path / "out", "lighteval|piqa|0"
    backfill = ["eval", "--checkpoints-dir", str(tmp_path / "run"), *_argv(tmp_path, out, ARC)[2:]]
    first = run_distributed(_cli, 1, [_argv(tmp_path / "run" / "10", out, ARC, "--model-name", "tiny")], timeout=300)
    assert first[0] == [(0, [])]
    (written,) = (out / "results" / "tiny" / "10").glob("results_*.json")
    before = written.read_bytes()
    outcomes = run_distributed(
        _cli,
        1,
        [
            _argv(tmp_path / "run" / "10", out, piqa, "--model-name", "tiny", "--pairwise-tokenization"),  # (a)
            [*backfill, "--model-name", "tiny", "--pairwise-tokenization"],  # (b)
            _argv(tmp_path / "edited" / "10", out, ARC, "--model-name", "tiny"),  # (c)
        ],
        timeout=300,
    )[0]
    assert [rc for rc, _ in outcomes] == [2, 2, 2], outcomes
    for _, errors in outcomes[:2]:
        (line,) = errors
        assert "pairwise_tokenization False there, True now" in line and "--model-name" in line, line
    (line,) = outcomes[2][1]
    assert "measured on other weights (weights_fingerprint '" in line and "--model-name" in line, line
    assert [path.name for path in (out / "results" / "tiny" / "10").iterdir()] == [written.name]
    assert written.read_bytes() == before
    content = _strict(written)
    assert set(content["results"]) == {ARC, "all"}
    assert content["config_general"]["identity"]["pairwise_tokenization"] is False
