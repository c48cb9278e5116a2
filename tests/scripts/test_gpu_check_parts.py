"""Parts of the device check (scripts/gpu_check.py, scripts/device_check/) that need no run: what
its report says when a run goes wrong, so that one rerun on the GPU machine can fix it."""

import importlib.metadata
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gpu_check  # noqa: E402
from device_check.report import summary_lines  # noqa: E402
from device_check.training import compare_trainings  # noqa: E402


def test_requirements_of_carried_wheels_that_the_image_does_not_meet_are_named(monkeypatch):
    """The wheels go in with --no-deps over the image's packages: a too-old pyarrow for the carried
    datasets is named in the report instead of surfacing as some AttributeError in a worker."""
    requires = {"carried": ["pyarrow>=24.0.0", "fsspec<=2026.9.0,>=2023.1.0", "absent-thing", "x; extra == 'y'"]}
    versions = {"pyarrow": "23.0.1", "fsspec": "2026.6.0"}

    def version(name):
        if name not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(importlib.metadata, "requires", lambda name: requires[name])
    monkeypatch.setattr(importlib.metadata, "version", version)
    assert gpu_check.unmet_requirements(("carried",)) == [
        "carried: pyarrow>=24.0.0 (found 23.0.1)",
        "carried: absent-thing (found none)",
    ]


def _report(**parts):
    environment = {"dry": False, "gpu_names": ["NVIDIA H200"], "python": "3.12.3", "torch": "2.11.0", "cuda": "13.0",
                   "packages": {"numpy": "2.5.2", "transformers": "5.17.0", "nanotron": "0.4"},
                   "attention": "SDPA stand-in", "cpu_count": 16,
                   "unmet_requirements": ["datasets: pyarrow>=24.0.0 (found 23.0.1)"]}  # fmt: skip
    return {"environment": environment, "seconds": 400.0, "budget": 450.0, "failures": [], **parts}


def test_the_summary_says_where_the_time_went_and_what_may_explain_a_failure():
    report = _report(
        step_seconds={"models": 12.0, "evaluations": 150.0, "training": 90.0},
        evaluations={
            "cpu": {"seconds": 149.0, "timings": {"cpu-random-float32": {"seconds": 40.0}}},
            "device": {"seconds": 60.0, "timings": {}},
        },
        training={"runs": {"train-with-hook": {"seconds": 61.0, "ranks": [{"nondeterministic": ["op X lacks one"]}]}}},
    )
    lines = summary_lines(report)
    time_line = next(line for line in lines if line.startswith("time: "))
    assert "models 12 s" in time_line and "evaluations 150 s (cpu 149 s: random-float32 40 s; device 60 s)" in time_line
    assert "training 90 s (train-with-hook 61 s)" in time_line and time_line.endswith("budget 450 s")
    assert "NOTE carried wheel needs datasets: pyarrow>=24.0.0 (found 23.0.1)" in lines
    assert "NOTE train-with-hook: op X lacks one" in lines
    assert lines[-1] == "RESULT: PASSED"


def test_the_summary_shows_the_memory_runs_pressure_batches_and_retries():
    """The lines only a CUDA run fills (the pressure, the memory the engine saw, retries)."""
    plans = [{"kind": "loglikelihood", "tokens_per_batch": 10**9, "micro_batches": 3, "largest": 65536}]
    cut = [{"kind": "loglikelihood", "tokens_per_batch": 9811, "micro_batches": 40, "largest": 9728}]
    retry = "loglikelihood ran out of memory; retrying with micro-batches of 4864 tokens"
    evaluations = [
        {"step": 4, "pressure": "ballast", "bytes": 2**30, "device_free_before": 2**37, "engine_free": 2**30,
         "before": plans, "after": cut, "retries": []},
        {"step": 8, "pressure": "cap", "bytes": 2**28, "device_free_before": 2**37, "engine_free": 2**37,
         "before": cut, "after": cut, "retries": [retry]},
    ]  # fmt: skip
    task = {"max_abs_diff": 0.01, "median_abs_diff": 0.002, "decisive_docs": 300, "decisive_flipped": 0}
    memory = {"bitwise_equal": True, "tokens_per_batch": 10**9, "evaluations": evaluations, "seconds": 55.0,
              "steps": {4: {"lighteval|piqa|0": task}}}  # fmt: skip
    lines = summary_lines(_report(step_seconds={"memory": 56.0}, memory=memory))
    assert "memory run step 4: ballast 1.00 GiB, the engine saw 1.00 GiB free; micro-batches 3 x <= 65536 tokens " \
        "(budget 1000000000) -> 40 x <= 9728 tokens (budget 9811); 0 out-of-memory retries" in lines
    assert any(line.startswith("memory run step 8: cap 0.25 GiB") and line.endswith(f"1 out-of-memory retries ({retry})")
               for line in lines)  # fmt: skip
    assert "memory run step 4 vs default budget: lighteval|piqa|0: |dlogprob| max 0.01, median 0.002; decisive " \
        "docs 300, flipped 0" in lines
    assert next(line for line in lines if line.startswith("time: ")).startswith("time: memory 56 s (train-memory 55 s)")


def test_a_memory_run_that_differs_failed_or_was_never_cut_is_a_failure(tmp_path):
    from device_check.memory import compare_memory_run

    plan = [{"kind": "loglikelihood", "tokens_per_batch": 10**9, "micro_batches": 1, "largest": 428}]
    memory = {"losses": [2.0, 1.5], "params": "a", "evaluated": [], "failures": [[2, "out of memory"]],
              "memory": [{"step": 2, "before": plan, "after": plan, "retries": []}]}  # fmt: skip
    plain = {**memory, "losses": [2.0, 1.25]}
    reports = {"train-memory": {"ranks": [memory]}, "train-without": {"ranks": [plain]}}
    summary, failures = compare_memory_run(reports, tmp_path, [2, 4])
    assert not summary["bitwise_equal"]
    assert failures == [
        "memory run: its training differs from the training without evaluation",
        "memory run: evaluated at [] (expected [2, 4]): [[2, 'out of memory']]",
        "memory run: no evaluation cut its micro-batches (the budget did not bind)",
    ]


@pytest.mark.parametrize(
    ("plain", "named"),
    [
        ({"losses": [2.0, 1.5], "params": "a"}, "rank 0 loss at step 2: 1.25 with the hook, 1.5 without"),
        ({"losses": [2.0, 1.25], "params": "b"}, "rank 0: equal losses, different final weights"),
    ],
)
def test_a_training_difference_names_where_the_trainings_part(plain, named):
    hooked = {"losses": [2.0, 1.25], "params": "a", "evaluated": [1, 2], "failures": [], "tokens_per_step": 8}
    plain = {**hooked, **plain}
    profile = type("Profile", (), {"train_steps": 2})
    summary, failures = compare_trainings(
        {"train-with-hook": {"ranks": [hooked]}, "train-without": {"ranks": [plain]}}, profile
    )
    assert not summary["bitwise_equal"]
    assert failures == [f"training with the hook differs from training without it: {named}"]


def test_the_transformers_baseline_refuses_to_time_another_model():
    from types import SimpleNamespace

    from device_check.baseline import check_same_model

    model = SimpleNamespace(config=SimpleNamespace(rope_parameters={"rope_theta": 100000.0}))
    config = {"tie_word_embeddings": True, "rope_theta": 100000.0}
    check_same_model(model, config, SimpleNamespace(missing_keys=["lm_head.weight"], unexpected_keys=[]))
    with pytest.raises(RuntimeError, match="weights not loaded"):
        check_same_model(model, config, SimpleNamespace(missing_keys=["model.norm.weight"], unexpected_keys=[]))
    with pytest.raises(RuntimeError, match="RoPE base 10000.0"):
        other = SimpleNamespace(config=SimpleNamespace(rope_parameters={"rope_theta": 10000.0}))
        check_same_model(other, config, SimpleNamespace(missing_keys=[], unexpected_keys=[]))


def test_bf16_choices_are_bounded_on_decisive_docs_only():
    """A near-tie that bf16 rounding reorders passes; a doc whose CPU fp32 choice leads by more than
    twice the error bound must keep its choice, whatever the accuracy does."""
    from device_check.evaluations import compare_bf16, decisive_choices

    cpu = {0: {"logprobs": [-5.0, -5.01]}, 1: {"logprobs": [-2.0, -9.0]}, 2: {"logprobs": [-3.0, -3.5]}}
    near_tie_flipped = {0: {"logprobs": [-5.02, -5.0]}, 1: {"logprobs": [-2.1, -9.1]}, 2: {"logprobs": [-3.0, -3.5]}}
    assert decisive_choices(cpu, near_tie_flipped, bound=0.1) == (2, [])
    decisive_flipped = {**near_tie_flipped, 1: {"logprobs": [-9.0, -2.0]}}
    assert decisive_choices(cpu, decisive_flipped, bound=0.1) == (2, [1])
    assert decisive_choices(cpu, decisive_flipped, bound=4.0) == (0, [])  # nothing leads by 8 nats

    def run(details, acc):
        rows = {doc: {**row, "cont_tokens": [[1]] * 2, "predictions": None} for doc, row in details.items()}
        return {"details": {"t": rows}, "results": {"t": {"acc": acc}}}

    bf16_rounded = {0: {"logprobs": [-5.05, -5.0]}, 1: {"logprobs": [-2.05, -9.05]}, 2: {"logprobs": [-3.0, -3.45]}}
    cpu_bf16 = run(bf16_rounded, 0.5)
    passed = compare_bf16(run(cpu, 0.5), cpu_bf16, run(near_tie_flipped, 0.9), "random bf16", "random")
    assert passed["failures"] == [] and passed["tasks"]["t"]["decisive_docs"] >= 1
    failed = compare_bf16(run(cpu, 0.5), cpu_bf16, run(decisive_flipped, 0.5), "random bf16", "random")
    assert any("docs [1] pick another choice" in f for f in failed["failures"])
    trained = compare_bf16(run(cpu, 0.5), cpu_bf16, run(near_tie_flipped, 0.9), "trained bf16", "trained")
    assert any("accuracy 0.900 vs CPU bf16 0.500" in f for f in trained["failures"])
