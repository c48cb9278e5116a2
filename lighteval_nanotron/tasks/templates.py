"""Cloze (CF) and multiple-choice-letter (MCF) renderings of a row, as lighteval's templates write
them in English (`lighteval/tasks/templates/{multichoice,continuation,hellaswag}.py`, the FineTasks
formulations): the same text, spacing and capitalization, so a `*_cf` / `*_mcf` task here gives
the prompts lighteval's templates give for the same row and the same fields (tested against
lighteval itself).

- `mcq_doc(question, choices, gold, ...)`: `Question: ...` then, in MCF, the options ` A. ...` one
  per line, then `Answer:`; CF scores each answer text, MCF each letter (` A`, ` B`, ...).
- `continuation_doc(context, continuations, gold)`: the context alone (CF, each continuation
  scored after it) or followed by the lettered continuations and `Answer:` (MCF).
- `hellaswag_doc(ctx_a, ctx_b, endings, gold, activity_label)`: HellaSwag's WikiHow clean-up,
  then a continuation doc.
- `winogrande_parts(sentence, option1, option2)`: the text before `_` as context, each option
  followed by the rest of the sentence as a continuation (lighteval's adapter, its two spaces
  included).

Text is normalized the way lighteval does it: trailing whitespace stripped, the first letter of
the question, context and each answer upper-cased, a continuation's first letter lower-cased
unless the context ends a sentence.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from enum import Enum

from lighteval_nanotron.requests import Doc

QUESTION_WORD, ANSWER_WORD, COLON, SPACE = "Question", "Answer", ":", " "
SENTENCE_ENDS = (".", "?", "!", ":", ";")
LETTERS = string.ascii_uppercase


class Formulation(str, Enum):
    """How the choices are shown and scored (the `cf` / `mcf` in a task name)."""

    CF = "cf"
    """Cloze: the choices are not listed; each answer text is scored after the prompt."""
    MCF = "mcf"
    """Multiple-choice letters: the choices are listed as ` A. ...`; each letter is scored."""


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _ends_sentence(text: str) -> bool:
    return text.rstrip().endswith(SENTENCE_ENDS)


def _clean(text: str) -> str:
    """Trailing whitespace stripped, first letter capitalized."""
    return _upper_first(str(text).rstrip())


def _after(prefix: str, text: str) -> str:
    """`text` capitalized after a sentence end or a line break (or at the start), else lower-cased."""
    if not prefix or prefix.endswith("\n") or _ends_sentence(prefix):
        return _upper_first(text)
    return _lower_first(text)


def _options(texts: Sequence[str]) -> str:
    """` A. first\\n B. second\\n` (with the final line break)."""
    return "".join(f"{SPACE}{LETTERS[i]}.{SPACE}{text}\n" for i, text in enumerate(texts))


def _targets(texts: Sequence[str], formulation: Formulation) -> list[str]:
    """What is scored: each answer text, or each letter, after a space."""
    if formulation is Formulation.MCF:
        return [SPACE + LETTERS[i] for i in range(len(texts))]
    return [SPACE + text for text in texts]


def _golds(gold: int | Sequence[int]) -> list[int]:
    return [gold] if isinstance(gold, int) else list(gold)


def mcq_doc(
    question: str,
    choices: Sequence[str],
    gold: int | Sequence[int],
    formulation: Formulation,
    context: str | None = None,
    instruction: str | None = None,
    task_name: str = "",
) -> Doc:
    """A question with answer choices (ARC, PIQA, SIQA, OpenBookQA, CommonsenseQA, MMLU)."""
    answers = [_clean(answer) for answer in choices]
    head = f"{instruction}\n" if instruction else ""
    head += f"{_clean(context)}\n" if context else ""
    options = _options(answers) if formulation is Formulation.MCF else ""
    query = f"{head}{QUESTION_WORD}{COLON}{SPACE}{_clean(question)}\n{options}{ANSWER_WORD}{COLON}"
    return Doc(
        task_name=task_name,
        query=query,
        choices=_targets(answers, formulation),
        gold_index=_golds(gold),
        instruction=instruction,
        unconditioned_query=f"{ANSWER_WORD}{COLON}",
    )


def continuation_doc(
    context: str,
    continuations: Sequence[str],
    gold: int | Sequence[int],
    formulation: Formulation,
    instruction: str | None = None,
    task_name: str = "",
) -> Doc:
    """A context and the ways it may go on (HellaSwag, WinoGrande)."""
    head = f"{instruction}\n" if instruction else ""
    context = _clean(context)
    endings = [_after(context, str(ending).rstrip()) for ending in continuations]
    if formulation is Formulation.MCF:
        query = f"{head}{context}\n{_options(endings)}{ANSWER_WORD}{COLON}"
        unconditioned = f"{ANSWER_WORD}{COLON}"
    else:
        query, unconditioned = f"{head}{context}", ""
    return Doc(
        task_name=task_name,
        query=query,
        choices=_targets(endings, formulation),
        gold_index=_golds(gold),
        instruction=head,
        unconditioned_query=unconditioned,
    )


def _wikihow_clean(text: str, title_replacement: str) -> str:
    """LM Eval Harness' HellaSwag clean-up: ` [title]` markers replaced, other brackets dropped,
    double spaces halved, then stripped."""
    text = re.sub(r"\[.*?\]", "", text.replace(" [title]", title_replacement))
    return text.replace("  ", " ").strip()


def hellaswag_doc(
    ctx_a: str,
    ctx_b: str,
    endings: Sequence[str],
    gold: int | Sequence[int],
    formulation: Formulation,
    activity_label: str = "",
    task_name: str = "",
) -> Doc | None:
    """HellaSwag: `Label:\\n` then the two context parts joined, each ending cleaned; None when an
    ending is empty after cleaning (lighteval drops such rows)."""
    first = _clean(_wikihow_clean(ctx_a, ". ")) if ctx_a else ""
    second = _clean(_wikihow_clean(ctx_b, ". ")) if ctx_b else ""
    context = f"{first.rstrip()}{SPACE}{_after(first, second)}" if second else first
    label = f"{_upper_first(activity_label)}:\n" if activity_label else ""
    cleaned = [_wikihow_clean(ending, ". ") for ending in endings]
    if any(not ending.strip() for ending in cleaned):
        return None
    return continuation_doc(label + context, cleaned, gold, formulation, task_name=task_name)


def winogrande_parts(sentence: str, option1: str, option2: str) -> tuple[str, list[str]] | None:
    """(context, continuations) of a WinoGrande sentence with exactly one `_` and text before it."""
    if sentence.count("_") != 1:
        return None
    context, rest = sentence.split("_")
    if not context.strip():
        return None
    return context, [f"{option}{SPACE}{rest}" for option in (option1, option2)]
