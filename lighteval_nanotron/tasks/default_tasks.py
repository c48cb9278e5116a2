"""The built-in benchmark suite: `TASKS_TABLE`, in lighteval 0.11's task keys and settings.

Each config keeps lighteval's name, suites, Hub dataset (`hf_repo`, `hf_subset`, splits),
few-shot settings, generation settings and metrics, so that `suite|task|k` means the same thing
here as there. The data of every task ships as a slice in `lighteval_nanotron/bundled_data/slices/`
(data dir `bundled`); see docs/benchmarks.md for the list and for pointing tasks at full copies.

Where this table departs from lighteval 0.11 it says so next to the config.
"""

from __future__ import annotations

import dataclasses

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.metrics.normalizations import (
    LogProbCharNorm,
    gsm8k_normalizer,
    harness_triviaqa_normalizer,
    helm_normalizer,
)
from lighteval_nanotron.tasks import default_prompts as prompt
from lighteval_nanotron.tasks.config import LightevalTaskConfig
from lighteval_nanotron.tasks.formulations import formulation_tasks

MMLU_SUBJECTS = (
    "abstract_algebra", "anatomy", "astronomy", "business_ethics", "clinical_knowledge",
    "college_biology", "college_chemistry", "college_computer_science", "college_mathematics",
    "college_medicine", "college_physics", "computer_security", "conceptual_physics",
    "econometrics", "electrical_engineering", "elementary_mathematics", "formal_logic",
    "global_facts", "high_school_biology", "high_school_chemistry",
    "high_school_computer_science", "high_school_european_history", "high_school_geography",
    "high_school_government_and_politics", "high_school_macroeconomics",
    "high_school_mathematics", "high_school_microeconomics", "high_school_physics",
    "high_school_psychology", "high_school_statistics", "high_school_us_history",
    "high_school_world_history", "human_aging", "human_sexuality", "international_law",
    "jurisprudence", "logical_fallacies", "machine_learning", "management", "marketing",
    "medical_genetics", "miscellaneous", "moral_disputes", "moral_scenarios", "nutrition",
    "philosophy", "prehistory", "professional_accounting", "professional_law",
    "professional_medicine", "professional_psychology", "public_relations", "security_studies",
    "sociology", "us_foreign_policy", "virology", "world_religions",
)  # fmt: skip


def acc_and_char_norm(ignore_first_space: bool = True) -> list:
    """Accuracy on summed log-probs and on log-probs per character (lighteval's cloze pair)."""
    norm = LogProbCharNorm(ignore_first_space=ignore_first_space)
    return [Metrics.loglikelihood_acc, Metrics.loglikelihood_acc(sample_params={"logprob_normalization": norm})]


def helm_exact_matches() -> list:
    """HELM's four exact-match variants: plain / normalized, whole / prefix."""
    normalized = {"normalize_gold": helm_normalizer, "normalize_pred": helm_normalizer}
    return [
        Metrics.exact_match,
        Metrics.exact_match(sample_params=normalized),
        Metrics.exact_match(sample_params={"type_exact_match": "prefix"}),
        Metrics.exact_match(sample_params={**normalized, "type_exact_match": "prefix"}),
    ]


# --- Multiple choice, cloze formulation (log-likelihood of each answer) -----------------------

arc_easy_lighteval = LightevalTaskConfig(
    name="arc:easy",
    suite=["lighteval", "arc"],
    prompt_function=prompt.arc,
    hf_repo="ai2_arc",
    hf_subset="ARC-Easy",
    hf_avail_splits=["train", "validation", "test"],
    evaluation_splits=["test"],
    few_shots_select="random_sampling_from_train",
    generation_size=1,
    metrics=acc_and_char_norm(),
    stop_sequence=["\n"],
)
arc_challenge_leaderboard = LightevalTaskConfig(
    name="arc:challenge",
    suite=["leaderboard", "arc"],
    prompt_function=prompt.arc,
    hf_repo="ai2_arc",
    hf_subset="ARC-Challenge",
    hf_avail_splits=["train", "test"],
    evaluation_splits=["test"],
    few_shots_select="random_sampling_from_train",
    generation_size=1,
    metrics=acc_and_char_norm(),
    stop_sequence=["\n"],
)
hellaswag_leaderboard = LightevalTaskConfig(
    name="hellaswag",
    suite=["leaderboard"],
    prompt_function=prompt.hellaswag_harness,
    hf_repo="hellaswag",
    hf_subset="default",
    hf_avail_splits=["train", "test", "validation"],
    evaluation_splits=["validation"],
    few_shots_select="random_sampling_from_train",
    generation_size=-1,
    metrics=acc_and_char_norm(ignore_first_space=False),
    stop_sequence=["\n"],
)
# Not in lighteval 0.11 (there `lighteval|hellaswag` does not exist): the same task under the
# key this project's examples use, so that results are keyed `lighteval|hellaswag|k`.
hellaswag_lighteval = dataclasses.replace(hellaswag_leaderboard, suite=["lighteval"])
piqa_lighteval = LightevalTaskConfig(
    name="piqa",
    suite=["lighteval"],
    prompt_function=prompt.piqa_harness,
    hf_repo="ybisk/piqa",
    hf_subset="plain_text",
    hf_avail_splits=["train", "test", "validation"],
    evaluation_splits=["validation"],
    generation_size=-1,
    metrics=acc_and_char_norm(),
    stop_sequence=["\n"],
)
winogrande_leaderboard = LightevalTaskConfig(
    name="winogrande",
    suite=["leaderboard"],
    prompt_function=prompt.winogrande,
    hf_repo="winogrande",
    hf_subset="winogrande_xl",
    hf_avail_splits=["train", "test", "validation"],
    evaluation_splits=["validation"],
    few_shots_select="random_sampling",
    generation_size=-1,
    metrics=[Metrics.loglikelihood_acc],
    stop_sequence=["\n"],
)
openbookqa_lighteval = LightevalTaskConfig(
    name="openbookqa",
    suite=["lighteval"],
    prompt_function=prompt.openbookqa,
    hf_repo="openbookqa",
    hf_subset="main",
    hf_avail_splits=["train", "test", "validation"],
    evaluation_splits=["test"],
    generation_size=-1,
    metrics=acc_and_char_norm(),
    stop_sequence=["\n"],
)
super_glue_boolq_lighteval = LightevalTaskConfig(
    name="super_glue:boolq",
    suite=["lighteval", "superglue"],
    prompt_function=prompt.boolq_harness,
    hf_repo="super_glue",
    hf_subset="boolq",
    hf_avail_splits=["test", "train", "validation"],
    evaluation_splits=["validation"],
    generation_size=-1,
    metrics=[Metrics.loglikelihood_acc],
    stop_sequence=["\n"],
)
sciq_lighteval = LightevalTaskConfig(
    name="sciq",
    suite=["lighteval"],
    prompt_function=prompt.sciq,
    hf_repo="sciq",
    hf_subset="default",
    hf_avail_splits=["train", "validation", "test"],
    evaluation_splits=["test"],
    generation_size=-1,
    metrics=acc_and_char_norm(),
    stop_sequence=["\n"],
)
super_glue_copa_lighteval = LightevalTaskConfig(
    name="super_glue:copa",
    suite=["lighteval", "superglue"],
    prompt_function=prompt.copa,
    hf_repo="super_glue",
    hf_subset="copa",
    hf_avail_splits=["test", "train", "validation"],
    evaluation_splits=["validation"],
    generation_size=-1,
    metrics=[Metrics.loglikelihood_acc],
    stop_sequence=["\n"],
)

# --- Multiple choice, letter formulation (MCF) -----------------------------------------------

arc_challenge_letters_original = LightevalTaskConfig(
    name="arc:c:letters",
    suite=["original", "arc"],
    prompt_function=prompt.arc_with_options_letters_predict,
    hf_repo="ai2_arc",
    hf_subset="ARC-Challenge",
    hf_avail_splits=["train", "validation", "test"],
    evaluation_splits=["test"],
    generation_size=1,
    metrics=[Metrics.loglikelihood_acc, Metrics.exact_match],
    stop_sequence=["\n"],
)
hellaswag_helm = LightevalTaskConfig(
    name="hellaswag",
    suite=["helm", "helm_general"],
    prompt_function=prompt.hellaswag_generative,
    hf_repo="hellaswag",
    hf_subset="default",
    hf_avail_splits=["train", "test", "validation"],
    evaluation_splits=["validation"],
    generation_size=1,
    metrics=helm_exact_matches(),
    stop_sequence=["\n"],
)
siqa_helm = LightevalTaskConfig(
    name="siqa",
    suite=["helm", "commonsense_scenario"],
    prompt_function=prompt.siqa,
    hf_repo="allenai/social_i_qa",
    hf_subset="default",
    hf_avail_splits=["train", "validation"],
    evaluation_splits=["validation"],
    generation_size=1,
    metrics=helm_exact_matches(),
    stop_sequence=["\n"],
)
openbookqa_helm = LightevalTaskConfig(
    name="openbookqa",
    suite=["helm", "commonsense_scenario", "helm_general"],
    prompt_function=prompt.openbookqa_helm,
    hf_repo="openbookqa",
    hf_subset="main",
    hf_avail_splits=["train", "test", "validation"],
    evaluation_splits=["validation", "test"],
    generation_size=1,
    metrics=helm_exact_matches(),
    stop_sequence=["\n"],
)
commonsenseqa_helm = LightevalTaskConfig(
    name="commonsenseqa",
    suite=["helm", "commonsense_scenario"],
    prompt_function=prompt.commonsense_qa,
    hf_repo="commonsense_qa",
    hf_subset="default",
    hf_avail_splits=["train", "test", "validation"],
    evaluation_splits=["validation"],
    generation_size=1,
    metrics=helm_exact_matches(),
    stop_sequence=["\n"],
)
mmlu_leaderboard = [
    LightevalTaskConfig(
        name=f"mmlu:{subject}",
        suite=["leaderboard", "mmlu"],
        prompt_function=prompt.mmlu_harness,
        hf_repo="lighteval/mmlu",
        hf_subset=subject,
        hf_avail_splits=["auxiliary_train", "test", "validation", "dev"],
        evaluation_splits=["test"],
        few_shots_split="dev",
        few_shots_select="sequential",
        generation_size=1,
        metrics=[Metrics.loglikelihood_acc],
        stop_sequence=["\n"],
    )
    for subject in MMLU_SUBJECTS
]

# --- Language modelling and generative tasks -------------------------------------------------

lambada_openai_lighteval = LightevalTaskConfig(
    name="lambada:openai",
    suite=["lighteval", "lambada"],
    prompt_function=prompt.lambada,
    hf_repo="EleutherAI/lambada_openai",
    hf_subset="default",
    hf_avail_splits=["test"],
    evaluation_splits=["test"],
    generation_size=10,
    metrics=[Metrics.target_perplexity],
    stop_sequence=["\n"],
)
triviaqa_lighteval = LightevalTaskConfig(
    name="triviaqa",
    suite=["lighteval"],
    prompt_function=prompt.triviaqa,
    hf_repo="trivia_qa",
    hf_subset="rc.nocontext",
    hf_avail_splits=["train", "test", "validation"],
    evaluation_splits=["validation"],
    generation_size=20,
    metrics=[Metrics.exact_match(sample_params={"strip_strings": True, "normalize_pred": harness_triviaqa_normalizer})],
    stop_sequence=["\n", ".", ","],
)
gsm8k_leaderboard = LightevalTaskConfig(
    name="gsm8k",
    suite=["leaderboard"],
    prompt_function=prompt.gsm8k,
    hf_repo="gsm8k",
    hf_subset="main",
    hf_avail_splits=["train", "test"],
    evaluation_splits=["test"],
    few_shots_select="random_sampling_from_train",
    generation_size=256,
    metrics=[
        Metrics.exact_match(sample_params={"normalize_gold": gsm8k_normalizer, "normalize_pred": gsm8k_normalizer})
    ],
    stop_sequence=[],
)
# lighteval 0.11 names the repository "lighteval/openai/gsm8k", which is not a valid Hub id;
# the dataset it means is "openai/gsm8k".
gsm8k_lighteval = LightevalTaskConfig(
    name="gsm8k",
    suite=["lighteval"],
    prompt_function=prompt.gsm8k,
    hf_repo="openai/gsm8k",
    hf_subset="main",
    hf_avail_splits=["train", "test"],
    evaluation_splits=["test"],
    few_shots_select="random_sampling_from_train",
    generation_size=256,
    metrics=[Metrics.expr_gold_metric],
    stop_sequence=["Question:"],
)

TASKS_TABLE: list[LightevalTaskConfig] = [
    arc_easy_lighteval,
    arc_challenge_leaderboard,
    arc_challenge_letters_original,
    hellaswag_leaderboard,
    hellaswag_lighteval,
    hellaswag_helm,
    piqa_lighteval,
    siqa_helm,
    winogrande_leaderboard,
    openbookqa_lighteval,
    openbookqa_helm,
    commonsenseqa_helm,
    super_glue_boolq_lighteval,
    sciq_lighteval,
    super_glue_copa_lighteval,
    *mmlu_leaderboard,
    lambada_openai_lighteval,
    triviaqa_lighteval,
    gsm8k_leaderboard,
    gsm8k_lighteval,
    # lighteval|<benchmark>_eng_{cf,mcf}[:subset]: the cloze and letter formulations (formulations.py)
    *formulation_tasks(MMLU_SUBJECTS),
]
