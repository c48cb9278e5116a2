"""Prompt functions of the built-in tasks: `fn(line, task_name) -> Doc`, one per prompt format.

Each renders a dataset row (in the field names of its Hub dataset) exactly as lighteval 0.11's
function of the same name does (same query, choices and gold), so that scores are comparable.
The few formats that read `line["__few_shots"]` (set by the task while it builds the few-shot
pool) render a few-shot example differently from an evaluated doc, as lighteval does.
"""

from __future__ import annotations

import re
import string
from typing import Any

from lighteval_nanotron.requests import Doc

LETTERS = tuple(string.ascii_uppercase)
COMMON_SENSE_INSTRUCTION = "The following are multiple choice questions (with answers) about common sense.\n"


def _lettered(options: list[str], separator_before: bool = False) -> str:
    """`A. x\\nB. y\\n` (or `\\nA. x\\nB. y` with the newline before each option)."""
    if separator_before:
        return "".join(f"\n{letter}. {option}" for letter, option in zip(LETTERS, options))
    return "".join(f"{letter}. {option}\n" for letter, option in zip(LETTERS, options))


def texts_of(line: dict, *keys: str) -> list[str]:
    """The list of texts at `line[keys[0]][keys[1]]...`; TypeError naming the field when it is not
    one (a string there, in a data dir's jsonl row, would be read one character a choice)."""
    value: Any = line
    for key in keys:
        value = value[key]
    if not isinstance(value, list) or not all(isinstance(text, str) for text in value):
        raise TypeError(f"field {'.'.join(keys)} is {value!r}: a list of texts was expected")
    return value


def _spaced(options: list[str]) -> list[str]:
    return [" " + option for option in options]


def _label_or_unknown(label: str) -> int:
    """A string label as an index; the unlabelled test rows (label "") get -1."""
    return int(label) if label != "" else -1


# --- ARC -------------------------------------------------------------------------------------


def _arc_gold(line: dict) -> int:
    return line["choices"]["label"].index(line["answerKey"])


def arc(line: dict, task_name: str = "") -> Doc:
    """Cloze: `Question: ...\\nAnswer:` scored on each answer text."""
    return Doc(
        task_name=task_name,
        query=f"Question: {line['question']}\nAnswer:",
        choices=_spaced(texts_of(line, "choices", "text")),
        gold_index=_arc_gold(line),
    )


def arc_with_options_letters_predict(line: dict, task_name: str = "") -> Doc:
    """Multiple-choice format (MCF): the options are listed, the letters are scored."""
    texts = texts_of(line, "choices", "text")
    return Doc(
        task_name=task_name,
        query=f"Question: {line['question']}\n{_lettered(texts, separator_before=True)}\nAnswer:",
        choices=list(LETTERS[: len(texts)]),
        gold_index=_arc_gold(line),
    )


# --- HellaSwag -------------------------------------------------------------------------------


def hellaswag_preprocess(text: str) -> str:
    """LM Eval Harness' cleaning: WikiHow ` [title]` markers become `. `, other brackets go."""
    text = text.replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def hellaswag_harness(line: dict, task_name: str = "") -> Doc:
    """Cloze: the activity and context, scored on each cleaned ending."""
    context = f"{line['ctx_a']} {line['ctx_b'].capitalize()} "
    return Doc(
        task_name=task_name,
        query=hellaswag_preprocess(f"{line['activity_label']}: {context}"),
        choices=[hellaswag_preprocess(ending) for ending in texts_of(line, "endings")],
        gold_index=_label_or_unknown(line["label"]),
    )


def hellaswag_generative(line: dict, task_name: str = "") -> Doc:
    """HELM's MCF: the endings are listed, the model answers with a letter."""
    instruction = COMMON_SENSE_INSTRUCTION + "\n"
    question = f"Question: {line['activity_label']}: {line['ctx_a']} {line['ctx_b'].capitalize()}\n"
    endings = texts_of(line, "endings")
    return Doc(
        task_name=task_name,
        query=instruction + question + _lettered(endings) + "Answer:",
        choices=_spaced(list(LETTERS[: len(endings)])),
        gold_index=_label_or_unknown(line["label"]),
        instruction=instruction,
    )


# --- PIQA, SIQA, WinoGrande, OpenBookQA, CommonsenseQA ----------------------------------------


def piqa_harness(line: dict, task_name: str = "") -> Doc:
    return Doc(
        task_name=task_name,
        query=f"Question: {line['goal']}\nAnswer:",
        choices=_spaced([line["sol1"], line["sol2"]]),
        gold_index=int(line["label"]),
    )


def piqa_helm(line: dict, task_name: str = "") -> Doc:
    """HELM's MCF; as a few-shot example the answer is the solution text, as in lighteval."""
    solutions = [line["sol1"], line["sol2"]]
    query = f"{COMMON_SENSE_INSTRUCTION}Question: {line['goal']}\n{_lettered(solutions)}Answer: "
    return Doc(
        task_name=task_name,
        query=query,
        choices=solutions if line.get("__few_shots", False) else ["A", "B"],
        gold_index=int(line["label"]),
        instruction=COMMON_SENSE_INSTRUCTION,
    )


def siqa(line: dict, task_name: str = "") -> Doc:
    answers = [line["answerA"], line["answerB"], line["answerC"]]
    query = f"{COMMON_SENSE_INSTRUCTION}Question: {line['context']} {line['question']}\n{_lettered(answers)}Answer: "
    return Doc(
        task_name=task_name,
        query=query,
        choices=["A", "B", "C"],
        gold_index=int(line["label"]) - 1,
        instruction=COMMON_SENSE_INSTRUCTION,
    )


def winogrande(line: dict, task_name: str = "") -> Doc:
    """Partial scoring: the text before `_` is the context, `option + rest` each continuation."""
    context, rest = line["sentence"].split("_")
    rest = rest.strip()
    return Doc(
        task_name=task_name,
        query=context,
        choices=[f"{line['option1']} {rest}", f"{line['option2']} {rest}"],
        gold_index=int(line["answer"]) - 1 if line["answer"] != "" else -1,
    )


def _openbookqa_gold(line: dict) -> int:
    return ["A", "B", "C", "D", "E"].index(line["answerKey"].strip())


def openbookqa(line: dict, task_name: str = "") -> Doc:
    """Cloze: the bare question stem, scored on each answer text."""
    return Doc(
        task_name=task_name,
        query=line["question_stem"],
        choices=_spaced(texts_of(line, "choices", "text")),
        gold_index=_openbookqa_gold(line),
    )


def openbookqa_helm(line: dict, task_name: str = "") -> Doc:
    texts = texts_of(line, "choices", "text")
    return Doc(
        task_name=task_name,
        query=f"{COMMON_SENSE_INSTRUCTION}Question: {line['question_stem']}\n{_lettered(texts)}Answer: ",
        choices=["A", "B", "C", "D", "E"],
        gold_index=_openbookqa_gold(line),
        instruction=COMMON_SENSE_INSTRUCTION,
    )


def commonsense_qa(line: dict, task_name: str = "") -> Doc:
    """HELM's MCF; each listed option keeps a leading space (`A.  bank`), as in lighteval."""
    texts = texts_of(line, "choices", "text")
    query = f"{COMMON_SENSE_INSTRUCTION}Question: {line['question']}\n{_lettered(_spaced(texts))}Answer:"
    return Doc(
        task_name=task_name,
        query=query,
        choices=list(LETTERS[: len(texts)]),
        gold_index=LETTERS.index(line["answerKey"].strip()),
        instruction=COMMON_SENSE_INSTRUCTION,
    )


# --- BoolQ, SciQ, COPA -----------------------------------------------------------------------


def boolq_harness(line: dict, task_name: str = "") -> Doc:
    return Doc(
        task_name=task_name,
        query=f"{line['passage']}\nQuestion: {line['question']}?\nAnswer:",
        choices=[" no", " yes"],
        gold_index=int(line["label"]),
    )


def sciq(line: dict, task_name: str = "") -> Doc:
    """The supporting passage (often empty), the question; the correct answer is always last."""
    distractors = [line["distractor1"], line["distractor2"], line["distractor3"]]
    return Doc(
        task_name=task_name,
        query=f"{line['support']}\nQuestion: {line['question']}\nAnswer:".strip(),
        choices=_spaced([*distractors, line["correct_answer"]]),
        gold_index=3,
    )


def copa_with_connectors(line: dict, connectors: dict[str, str], task_name: str = "") -> Doc:
    """Premise without its final period + connector; each choice with a lower-cased first letter."""
    return Doc(
        task_name=task_name,
        query=f"{line['premise'].strip()[:-1]} {connectors[line['question']]}",
        choices=[f" {line[key][0].lower()}{line[key][1:]}" for key in ("choice1", "choice2")],
        gold_index=int(line["label"]),
    )


def copa(line: dict, task_name: str = "") -> Doc:
    return copa_with_connectors(line, {"cause": "because", "effect": "therefore"}, task_name)


# --- MMLU ------------------------------------------------------------------------------------


def mmlu_harness(line: dict, task_name: str = "") -> Doc:
    """The harness' MMLU: subject header, lettered options, scored on ` A`..` D`."""
    instruction = (
        f"The following are multiple choice questions (with answers) about {line['subject'].replace('_', ' ')}.\n\n"
    )
    answer = line["answer"]
    return Doc(
        task_name=task_name,
        query=instruction + line["question"] + "\n" + _lettered(texts_of(line, "choices")) + "Answer:",
        choices=[" A", " B", " C", " D"],
        gold_index=LETTERS.index(answer) if isinstance(answer, str) else answer,
        instruction=instruction,
    )


# --- LAMBADA, TriviaQA, GSM8K ----------------------------------------------------------------


def lambada(line: dict, task_name: str = "") -> Doc:
    """The passage without its last word; the target is ` <last word>`."""
    context, last_word = line["text"].rsplit(" ", 1)
    return Doc(task_name=task_name, query=context, choices=[f" {last_word}"], gold_index=0)


def _drop_extensions(aliases: list[str]) -> list[str]:
    """Sorted aliases without those that extend the previously kept one (lighteval's pruning)."""
    kept: list[str] = []
    for alias in sorted(aliases):
        if not kept or not alias.startswith(kept[-1]):
            kept.append(alias)
    return kept


def triviaqa(line: dict, task_name: str = "") -> Doc:
    """Generative QA; every alias (lower-cased, punctuation removed) is a gold answer.

    lighteval nests the aliases in one choice (`choices=[aliases]`, `gold_index=0`) and flattens
    them in `Doc.get_golds`; here they are the choices and all of them gold, which gives the same
    golds with this project's `Doc`.
    """
    strip_punctuation = str.maketrans("", "", string.punctuation)
    aliases = _drop_extensions(texts_of(line, "answer", "aliases"))
    candidates = [alias.lower().translate(strip_punctuation) for alias in aliases]
    return Doc(
        task_name=task_name,
        query=f"Question: {line['question']}\nAnswer:",
        choices=candidates,
        gold_index=list(range(len(candidates))),
    )


def gsm8k(line: dict, task_name: str = "") -> Doc:
    """The gold is the full worked solution ending in `#### <number>`; metrics extract the number."""
    return Doc(
        task_name=task_name,
        query=f"Question: {line['question']}\nAnswer:",
        choices=[f" {line['answer']}"],
        gold_index=0,
    )
