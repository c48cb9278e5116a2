"""A deterministic toy language model and small local tasks for the pipeline tests.

`BigramLM` is a real (if tiny) model: a character bigram table with add-one smoothing, counted
from a fixed corpus. It answers the three request kinds the way an engine does, so the pipeline
runs end to end on it without a mock anywhere.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from lighteval_nanotron.metrics import LogProbPMINorm, Metrics
from lighteval_nanotron.models.interface import LightevalModel, PlanningModel
from lighteval_nanotron.requests import ModelResponse
from lighteval_nanotron.tasks import Doc, LightevalTaskConfig, PromptManager

CORPUS = "abcdefghij\n" * 20 + "klmnop\n" * 10 + "the cat sat on the mat\n" * 5
VOCAB = sorted(set(CORPUS) | set(" ?:.,\n0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
BOS = len(VOCAB)


class CharTokenizer:
    """One token per character of `VOCAB`, plus a BOS token."""

    def encode(self, text: str) -> list[int]:
        return [VOCAB.index(ch) for ch in text]

    def decode(self, tokens: list[int]) -> str:
        return "".join(VOCAB[t] for t in tokens if t != BOS)


class BigramLM(LightevalModel):
    """Character bigram LM: log P(next | previous), previous = BOS at the start of a text."""

    model_name = "toy-bigram"

    def __init__(self, corpus: str = CORPUS) -> None:
        self.tokenizer = CharTokenizer()
        self.prompt_fn = PromptManager().prepare_prompt
        size = len(VOCAB)
        counts = [[1.0] * size for _ in range(size + 1)]
        previous = BOS
        for token in self.tokenizer.encode(corpus):
            counts[previous][token] += 1.0
            previous = token
        self.table = [[math.log(c / sum(row)) for c in row] for row in counts]
        self.calls: list[str] = []

    def score(self, context: list[int], continuation: list[int]) -> tuple[float, bool]:
        """Summed log-probability of `continuation` after `context`, and whether greedy
        decoding would produce it token by token."""
        previous = context[-1] if context else BOS
        total, greedy = 0.0, True
        for token in continuation:
            row = self.table[previous]
            total += row[token]
            greedy = greedy and row[token] == max(row)
            previous = token
        return total, greedy

    def generate(self, context: list[int], max_new_tokens: int, stops: list[str]) -> str:
        previous = context[-1] if context else BOS
        out: list[int] = []
        for _ in range(max_new_tokens):
            row = self.table[previous]
            previous = row.index(max(row))
            out.append(previous)
            text = self.tokenizer.decode(out)
            for stop in stops:
                if stop and stop in text:
                    return text[: text.index(stop)]
        return self.tokenizer.decode(out)

    def _choices(self, doc: Doc, unconditioned: bool) -> ModelResponse:
        prompt = self.prompt_fn(doc)
        context = self.tokenizer.encode(prompt)
        continuations = [self.tokenizer.encode(choice) for choice in doc.choices]
        scores = [self.score(context, tokens) for tokens in continuations]
        response = ModelResponse(
            input=prompt,
            input_tokens=context,
            logprobs=[s for s, _ in scores],
            argmax_logits_eq_gold=[g for _, g in scores],
            output_tokens=continuations,
        )
        if unconditioned and doc.unconditioned_query is not None:
            free = self.tokenizer.encode(doc.unconditioned_query)
            response.unconditioned_logprobs = [self.score(free, tokens)[0] for tokens in continuations]
        return response

    def _rolling(self, doc: Doc) -> ModelResponse:
        prompt = self.prompt_fn(doc)
        tokens = self.tokenizer.encode(prompt)
        return ModelResponse(
            input=prompt, input_tokens=tokens, logprobs=[self.score([], tokens)[0]], output_tokens=[tokens]
        )

    def _generation(self, doc: Doc) -> ModelResponse:
        prompt = self.prompt_fn(doc)
        context = self.tokenizer.encode(prompt)
        text = self.generate(context, doc.generation_size or 16, doc.stop_sequences or [])
        return ModelResponse(
            input=prompt, input_tokens=context, text=[text], output_tokens=[self.tokenizer.encode(text)]
        )

    # --- the model interface ---

    def loglikelihood(self, docs: list[Doc], unconditioned: bool = False) -> list[ModelResponse]:
        self.calls.append("loglikelihood")
        return [self._choices(doc, unconditioned) for doc in docs]

    def loglikelihood_rolling(self, docs: list[Doc]) -> list[ModelResponse]:
        self.calls.append("loglikelihood_rolling")
        return [self._rolling(doc) for doc in docs]

    def greedy_until(self, docs: list[Doc]) -> list[ModelResponse]:
        self.calls.append("greedy_until")
        return [self._generation(doc) for doc in docs]


class PlanningBigramLM(BigramLM, PlanningModel):
    """The same model with the engine's prepare-once / run-many split: a plan fixes the docs
    (and would hold their tokens and batches); `run(plan)` does the scoring."""

    def prepare_loglikelihood(self, docs: list[Doc], unconditioned: bool = False) -> tuple:
        self.calls.append("prepare_loglikelihood")
        return ("choices", list(docs), unconditioned)

    def prepare_rolling(self, docs: list[Doc]) -> tuple:
        self.calls.append("prepare_rolling")
        return ("rolling", list(docs), False)

    def prepare_generation(self, docs: list[Doc]) -> tuple:
        self.calls.append("prepare_generation")
        return ("generation", list(docs), False)

    def run(self, plan: tuple, on_micro_batch=None) -> list[ModelResponse]:
        """Each doc is its own micro-batch (`on_micro_batch` told after each)."""
        kind, docs, unconditioned = plan
        self.calls.append(f"run:{kind}")
        answer = {"choices": lambda doc: self._choices(doc, unconditioned), "rolling": self._rolling}
        responses = []
        for done, doc in enumerate(docs, start=1):
            responses.append(answer.get(kind, self._generation)(doc))
            if on_micro_batch is not None:
                on_micro_batch(done, len(docs))
        return responses


# --- small local tasks: rows written as jsonl under a data dir, prompt functions below ---

MC_ROWS = [  # the bigram table prefers the gold choice in the first three rows only
    {"question": "abc", "choices": ["d", "q"], "gold": 0},
    {"question": "klm", "choices": ["x", "n"], "gold": 1},
    {"question": "the c", "choices": ["at", "zz"], "gold": 0},
    {"question": "efg", "choices": ["h", "w"], "gold": 1},
]
GEN_ROWS = [  # greedy continuation of the last character, until "\n"
    {"question": "abc", "answer": "defghij"},
    {"question": "klm", "answer": "nop"},
    {"question": "abc", "answer": "xyz"},
]
PPL_ROWS = [{"text": "abcdefghij"}, {"text": "the cat sat on the mat"}, {"text": "zyx wvu"}]


def mc_prompt(line: dict, task_name: str) -> Doc:
    return Doc(
        task_name=task_name,
        query=line["question"],
        choices=line["choices"],
        gold_index=line["gold"],
        unconditioned_query=line["question"][-1:],
    )


def gen_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["question"], choices=[line["answer"]], gold_index=0)


def ppl_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["text"], choices=[], gold_index=0)


def write_datasets(root: Path) -> Path:
    """`<root>/toy/<subset>/test.jsonl` for each toy task; returns `root` (a data dir)."""
    for subset, rows in (("mc", MC_ROWS), ("gen", GEN_ROWS), ("ppl", PPL_ROWS)):
        folder = root / "toy" / subset
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return root


def _config(name: str, subset: str, prompt, metrics, **extra) -> LightevalTaskConfig:
    return LightevalTaskConfig(
        name=name,
        prompt_function=prompt,
        hf_repo="toy",
        hf_subset=subset,
        metrics=metrics,
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        suite=["custom"],
        **extra,
    )


ALL_TOY_TASKS = "custom|toy_mc|0,custom|toy_gen|0,custom|toy_ppl|0,custom|toy_pmi|0"

TASKS_TABLE = [
    _config("toy_mc", "mc", mc_prompt, [Metrics.loglikelihood_acc]),
    _config(
        "toy_gen",
        "gen",
        gen_prompt,
        [Metrics.exact_match, Metrics.loglikelihood_acc],
        generation_size=12,
        stop_sequence=["\n"],
    ),
    _config("toy_ppl", "ppl", ppl_prompt, [Metrics.word_perplexity, Metrics.bits_per_byte]),
    _config(  # sampled: 5 generations per doc at the task's own temperature (not in ALL_TOY_TASKS)
        "toy_sampled",
        "gen",
        gen_prompt,
        [Metrics.maj_at_5, Metrics.pass_at_1(sample_params={"n": 5})],
        generation_size=6,
        stop_sequence=["\n"],
        generation_parameters={"temperature": 1.0, "top_k": 50, "seed": 11},
    ),
    _config(
        "toy_pmi",
        "mc",
        mc_prompt,
        [Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbPMINorm()})],
    ),
]
