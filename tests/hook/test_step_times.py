"""The training-step clock behind `eval/cost_train_steps`, with and without Nanotron's stamp."""

import time
from types import SimpleNamespace

import pytest

from lighteval_nanotron.hook.step_times import StepTimes


def test_nanotron_04_stamp_times_each_step_and_the_first_is_left_out():
    times = StepTimes()
    for seconds in (5.0, 0.2, 0.4):
        times.record(SimpleNamespace(iteration_start_time=time.time() - seconds))
    assert times.seconds == pytest.approx([5.0, 0.2, 0.4], abs=0.05)
    assert times.mean_s == pytest.approx(0.3, abs=0.05)
    assert times.in_steps(3.0) == pytest.approx(10.0, rel=0.2)


def test_without_a_stamp_a_step_runs_from_the_end_of_the_hooks_previous_call():
    """Current Nanotron: no `iteration_start_time`; an evaluation in between is not counted."""
    times, trainer = StepTimes(), SimpleNamespace()
    times.record(trainer)  # first step: nothing to measure from
    assert times.seconds == [] and times.mean_s is None and times.in_steps(1.0) is None
    time.sleep(0.3)  # an evaluation after step 1
    times.step_ended()
    time.sleep(0.1)  # step 2
    times.record(trainer)
    assert times.seconds == pytest.approx([0.1], abs=0.08)


def test_a_cuda_step_is_timed_once_its_queued_work_is_done(monkeypatch):
    """On a GPU `post_train_step` comes when the step's kernels are queued: the device is
    synchronised before the end of the step is read (else the backward and the optimizer step, still
    running, would count towards the next step or the evaluation, and a step look shorter)."""
    import torch

    from lighteval_nanotron.hook import step_times

    events = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: (events.append("sync"), time.sleep(0.05)))
    times = step_times.StepTimes()
    times.record(SimpleNamespace(iteration_start_time=time.time()))
    assert events == ["sync"] and times.seconds[0] >= 0.05
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # a CPU training on a GPU machine
    times.record(SimpleNamespace(iteration_start_time=time.time()))
    assert events == ["sync"]
