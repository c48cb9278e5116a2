"""Built-in prompt formats, pinned to what lighteval 0.11 renders for the same rows.

The expected strings below were written by hand from the first row of each shipped slice,
following lighteval 0.11's prompt functions; a change to a prompt or to the slices shows here.
"""

from __future__ import annotations

import gzip
import json

import pytest

from lighteval_nanotron.tasks import PromptManager, Registry, set_data_dirs
from lighteval_nanotron.tasks import default_prompts as prompts
from lighteval_nanotron.tasks.data_dirs import BUNDLED_ROOT

MMLU_HEADER = "The following are multiple choice questions (with answers) about abstract algebra.\n\n"

PINNED = {
    "lighteval|arc:easy": (
        "Question: A student hypothesizes that algae are producers. Which question will best help the "
        "student determine if this is correct?\nAnswer:",
        [
            " Do algae consume other organisms?",
            " Which organisms consume algae?",
            " Do algae use sunlight to make food?",
            " Could an ecosystem survive without algae?",
        ],
        2,
    ),
    "leaderboard|hellaswag": (
        "Sharpening knives: The stone particles stick to the wet piece of wood. He then takes the knife "
        "and sharpens it against the wood piece. He ",
        [
            "then cuts off the excess hair of the wood.",
            "scrapes the wood with a broom in the cutting tool used in sharpening the instrument.",
            "writes on the board again.",
            "then notices a little black and green poisonous frog sitting next to him.",
        ],
        3,
    ),
    "lighteval|piqa": (
        "Question: To fight Ivan Drago in Rocky for sega master system.\nAnswer:",
        [
            " Drago isn't in this game because it was released before Rocky IV.",
            " You have to defeat Apollo Creed and Clubber Lang first.",
        ],
        1,
    ),
    "leaderboard|winogrande": (
        "They were worried the wine would ruin the bed and the blanket, but the ",
        ["blanket was't ruined.", "bed was't ruined."],
        1,
    ),
    "leaderboard|mmlu:abstract_algebra": (
        MMLU_HEADER + "\n\n"
        "Find all zeros in the indicated finite field of the given polynomial with coefficients in that "
        "field. x^5 + 3x^3 + x^2 + 2x in Z_5\nA. 0\nB. 1\nC. 0,1\nD. 0,4\nAnswer:",
        [" A", " B", " C", " D"],
        3,
    ),
    "leaderboard|gsm8k": (
        "Question: Josh decides to try flipping a house.  He buys a house for $80,000 and then puts in "
        "$50,000 in repairs.  This increased the value of the house by 150%.  How much profit did he make?"
        "\nAnswer:",
        [
            " The cost of the house and repairs came out to 80,000+50,000=$<<80000+50000=130000>>130,000\n"
            "He increased the value of the house by 80,000*1.5=<<80000*1.5=120000>>120,000\n"
            "So the new value of the house is 120,000+80,000=$<<120000+80000=200000>>200,000\n"
            "So he made a profit of 200,000-130,000=$<<200000-130000=70000>>70,000\n#### 70000"
        ],
        0,
    ),
}


@pytest.fixture(autouse=True)
def bundled_data():
    set_data_dirs(["bundled"])


def first_doc(spec: str):
    """The doc of the slice's first row (id "0"), as the task hands it to the model."""
    task = next(iter(Registry(tasks=spec).load_tasks().values()))
    return next(doc for doc in task.get_docs() if doc.id == "0")


@pytest.mark.parametrize("key", sorted(PINNED))
def test_first_doc_renders_as_lighteval(key):
    expected_prompt, expected_choices, expected_gold = PINNED[key]
    doc = first_doc(f"{key}|0")
    assert PromptManager().prepare_prompt(doc) == expected_prompt
    assert doc.choices == expected_choices
    assert doc.gold_index == expected_gold


def test_mmlu_five_shot_uses_the_dev_rows_in_order():
    with gzip.open(BUNDLED_ROOT / "lighteval/mmlu/abstract_algebra/dev.jsonl.gz", "rt", encoding="utf-8") as f:
        dev = [json.loads(line) for line in f]
    examples = [
        row["question"]
        + "\n"
        + "".join(f"{letter}. {c}\n" for letter, c in zip("ABCD", row["choices"]))
        + "Answer: "
        + "ABCD"[row["answer"]]
        for row in dev
    ]
    query = PINNED["leaderboard|mmlu:abstract_algebra"][0][len(MMLU_HEADER) + 2 :]
    expected = "\n\n".join([MMLU_HEADER, *examples, query])
    assert PromptManager().prepare_prompt(first_doc("leaderboard|mmlu:abstract_algebra|5")) == expected


def test_hellaswag_preprocess_removes_wikihow_artifacts():
    assert (
        prompts.hellaswag_preprocess("Clean the car [title] Rinse it. [step] Dry.") == "Clean the car. Rinse it. Dry."
    )


def test_hellaswag_test_rows_have_no_gold():
    row = {"activity_label": "A", "ctx_a": "b.", "ctx_b": "c", "endings": ["d", "e"], "label": ""}
    assert prompts.hellaswag_harness(row).gold_index == -1


def test_triviaqa_golds_are_pruned_normalized_aliases():
    row = {"question": "Q?", "answer": {"aliases": ["Sunset Blvd.", "Sunset Blvd", "West Sunset", "Sunset Boulevard"]}}
    doc = prompts.triviaqa(row)
    # Sorted, an alias that extends the last kept one ("Sunset Blvd." after "Sunset Blvd") is dropped.
    assert doc.query == "Question: Q?\nAnswer:"
    assert doc.get_golds() == ["sunset blvd", "sunset boulevard", "west sunset"]


def test_letter_formats():
    arc_row = {"question": "Q?", "choices": {"text": ["x", "y", "z"], "label": ["1", "2", "3"]}, "answerKey": "2"}
    doc = prompts.arc_with_options_letters_predict(arc_row)
    assert (doc.query, doc.choices, doc.gold_index) == ("Question: Q?\n\nA. x\nB. y\nC. z\nAnswer:", ["A", "B", "C"], 1)

    csqa_row = {"question": "Q?", "choices": {"text": ["x", "y"], "label": ["A", "B"]}, "answerKey": "B"}
    doc = prompts.commonsense_qa(csqa_row)
    assert doc.query == prompts.COMMON_SENSE_INSTRUCTION + "Question: Q?\nA.  x\nB.  y\nAnswer:"
    assert (doc.choices, doc.gold_index) == (["A", "B"], 1)

    siqa_row = {"context": "C.", "question": "Q?", "answerA": "a", "answerB": "b", "answerC": "c", "label": "3"}
    doc = prompts.siqa(siqa_row)
    assert doc.query == prompts.COMMON_SENSE_INSTRUCTION + "Question: C. Q?\nA. a\nB. b\nC. c\nAnswer: "
    assert doc.gold_index == 2

    mmlu_row = {"subject": "high_school_physics", "question": "Q?", "choices": ["a", "b", "c", "d"], "answer": "C"}
    doc = prompts.mmlu_harness(mmlu_row)
    assert (
        doc.instruction == "The following are multiple choice questions (with answers) about high school physics.\n\n"
    )
    assert doc.gold_index == 2


def test_piqa_helm_few_shot_examples_answer_with_the_solution():
    row = {"goal": "G", "sol1": "one", "sol2": "two", "label": 1}
    assert prompts.piqa_helm(dict(row)).get_golds() == ["B"]
    assert prompts.piqa_helm({**row, "__few_shots": True}).get_golds() == ["two"]


def test_copa_boolq_sciq_lambada():
    copa_row = {
        "premise": "The man fell.",
        "choice1": "He slipped.",
        "choice2": "He won.",
        "question": "cause",
        "label": 0,
    }
    doc = prompts.copa(copa_row)
    assert (doc.query, doc.choices) == ("The man fell because", [" he slipped.", " he won."])

    doc = prompts.boolq_harness({"passage": "P.", "question": "is it", "label": 1})
    assert (doc.query, doc.get_golds()) == ("P.\nQuestion: is it?\nAnswer:", [" yes"])

    sciq_row = {
        "support": "",
        "question": "Q?",
        "distractor1": "a",
        "distractor2": "b",
        "distractor3": "c",
        "correct_answer": "d",
    }
    doc = prompts.sciq(sciq_row)
    assert (doc.query, doc.get_golds()) == ("Question: Q?\nAnswer:", [" d"])

    doc = prompts.lambada({"text": "He said hello to his friend"})
    assert (doc.query, doc.choices) == ("He said hello to his", [" friend"])
