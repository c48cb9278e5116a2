"""A hand-built `EvaluationResult` for the logger tests (the pipeline tests build real ones)."""

from lighteval_nanotron.pipeline.result import EvaluationResult, SampleDetail

TASK_A = "custom|toy_mc|0"
TASK_B = "custom|toy_ppl|0"


def _detail(task: str, index: int, correct: bool) -> SampleDetail:
    return SampleDetail(
        task_name=task,
        doc_id=str(index),
        sampling_method="LOGPROBS",
        query=f"Question {index}?",
        full_prompt=f"Question {index}?",
        choices=[" yes", " no"],
        gold_index=[0],
        gold=[" yes"],
        predictions=[],
        logprobs=[-0.5, -1.5] if correct else [-1.5, -0.5],
        argmax_logits_eq_gold=[correct, False],
        unconditioned_logprobs=None,
        input_tokens=[1, 2, 3],
        output_tokens=[[4], [5]],
        truncated_tokens_count=0,
        padded_tokens_count=1,
        metrics={"acc": float(correct), "ppl_items": (-1.25, 3)},
    )


def make_result(step: int | None = 100, acc: float = 0.5, consumed_tokens: int | None = 4096) -> EvaluationResult:
    details = {TASK_A: [_detail(TASK_A, i, correct=i % 2 == 0) for i in range(4)]}
    return EvaluationResult(
        model_name="toy-run",
        results={
            TASK_A: {"acc": acc, "acc_stderr": 0.1},
            TASK_B: {"ppl": 12.5, "ppl_stderr": 1.5},
            "all": {"acc": acc, "acc_stderr": 0.1, "ppl": 12.5, "ppl_stderr": 1.5},
        },
        details=details,
        versions={TASK_A: 0, TASK_B: 1},
        config_tasks={TASK_A: {"name": "toy_mc"}, TASK_B: {"name": "toy_ppl"}},
        summary_tasks={TASK_A: {"effective_num_docs": 4}},
        summary_general={"truncated": 0},
        wall_time_s=1.25,
        start_time=1_700_000_000.0,
        end_time=1_700_000_001.25,
        step=step,
        consumed_tokens=consumed_tokens,
        max_samples=4,
    )
