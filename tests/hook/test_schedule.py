"""When the hook evaluates: intervals, checkpoints, start and end, never a step twice."""

from lighteval_nanotron.hook.schedule import EvalSchedule, Moment
from lighteval_nanotron.options.hook import EvaluationConfig


def _walk(schedule: EvalSchedule, start: int, train_steps: int, checkpoint_interval: int) -> list[tuple[str, int]]:
    """Replay Nanotron's loop order: start, then per step post_train_step then checkpoint, then end."""
    fired = []

    def visit(moment: Moment, step: int) -> None:
        if schedule.wants(moment, step):
            schedule.mark(step)
            fired.append((moment.value, step))

    visit(Moment.START, start)
    for step in range(start + 1, train_steps + 1):
        visit(Moment.STEP, step)
        if step % checkpoint_interval == 0:
            visit(Moment.CHECKPOINT, step)
    visit(Moment.END, train_steps)
    return fired


def test_interval_start_and_end_without_duplicates():
    schedule = EvalSchedule.from_config(EvaluationConfig(tasks="a|b|0", eval_interval=4, eval_at_start=True))
    fired = _walk(schedule, 0, 10, checkpoint_interval=100)
    assert fired == [("start", 0), ("step", 4), ("step", 8), ("end", 10)]
    assert schedule.planned_steps(0, 10, 100) == [0, 4, 8, 10]


def test_checkpoints_and_interval_share_a_step_once():
    schedule = EvalSchedule(eval_interval=3, eval_at_checkpoints=True, eval_at_end=True)
    fired = _walk(schedule, 0, 6, checkpoint_interval=2)
    assert fired == [("checkpoint", 2), ("step", 3), ("checkpoint", 4), ("step", 6)]
    assert EvalSchedule(eval_interval=3, eval_at_checkpoints=True).planned_steps(0, 6, 2) == [2, 3, 4, 6]


def test_resumed_run_skips_steps_already_evaluated():
    schedule = EvalSchedule(eval_interval=2, eval_at_start=True, eval_at_end=True)
    for step in (4, 6):  # found on disk by the restarted run
        schedule.mark(step)
    assert _walk(schedule, 4, 8, checkpoint_interval=100) == [("step", 8)]


def test_step_zero_checkpoint_is_not_an_evaluation():
    assert not EvalSchedule(eval_at_checkpoints=True).wants(Moment.CHECKPOINT, 0)
    assert not EvalSchedule(eval_interval=5).wants(Moment.STEP, 0)
