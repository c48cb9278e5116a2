"""`LightevalTask`: a configured task, its dataset, its docs and their few-shot examples.

Everything here is deterministic and free of global state: docs come out in the same order with
the same few-shot examples in every process and at every call, and no global RNG is touched.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import random
from collections.abc import Callable
from itertools import islice
from typing import Any

from lighteval_nanotron.errors import ConfigError, DatasetLoadError, PromptFunctionError
from lighteval_nanotron.requests import Doc, SamplingMethod
from lighteval_nanotron.tasks.config import LightevalTaskConfig
from lighteval_nanotron.tasks.data_dirs import DatasetSource, describe_data_dirs, get_data_dirs, load_source
from lighteval_nanotron.tasks.data_origin import DataOrigin
from lighteval_nanotron.tasks.fewshot import FewShotDraws, FewShotSampler
from lighteval_nanotron.tasks.fewshot_lighteval import (
    DOC_SHUFFLE_SEED,
    LIGHTEVAL_VERSION,
    LightevalFewShotDraws,
    default_draws,
    shuffled_doc_order,
)
from lighteval_nanotron.tasks.lighteval_adapter.installed import is_lighteval_object

logger = logging.getLogger(__name__)

FEWSHOT_SEED = 0
"""Seed of the per-doc draws, and lighteval's variance seed (the one its `get_docs` uses)."""
FEWSHOT_SPLIT_KEYWORDS = ("train", "dev", "valid", "default")

DocKey = tuple[str, int]  # (split, row index): where a doc comes from


def metric_samples(metrics: list[Any]) -> list[int]:
    """Samples per doc the metrics need (a sampling metric's `num_samples`: maj@k's k, pass@k's n)."""
    needs = [getattr(getattr(m, "sample_level_fn", None), "num_samples", None) for m in metrics]
    return [int(n) for n in needs if isinstance(n, int)]


def _has_images(doc: Doc) -> bool:
    """Whether a doc carries images (a list of them, or one image object; an empty list is none)."""
    return doc.images is not None and not (isinstance(doc.images, (list, tuple)) and len(doc.images) == 0)


def _content_key(doc: Doc) -> tuple:
    return (doc.query, tuple(map(str, doc.choices)), repr(doc.gold_index), doc.instruction)


def _drop_duplicates(docs: list[Doc], keys: list[DocKey]) -> tuple[list[Doc], list[DocKey]]:
    seen: set[tuple] = set()
    kept_docs, kept_keys = [], []
    for doc, key in zip(docs, keys):
        content = _content_key(doc)
        if content not in seen:
            seen.add(content)
            kept_docs.append(doc)
            kept_keys.append(key)
    return kept_docs, kept_keys


class LightevalTask:
    """One task of a run, built from its config (lighteval's attribute names are kept)."""

    def __init__(self, config: LightevalTaskConfig):
        self.config = config
        self.dataset_config = config
        self.name = config.name
        self.version = config.version
        self.suite = config.suite
        self.full_name = config.full_name

        self.dataset_path = config.hf_repo
        self.dataset_config_name = config.hf_subset
        self.dataset_revision = config.hf_revision
        self.dataset_filter = config.hf_filter
        self.dataset: Any = None  # a datasets.DatasetDict, loaded on first use
        self.data_origin: DataOrigin | None = None  # where `dataset` was read from
        self.data_source: dict[str, Any] = {}
        """Where the evaluated docs came from and how many there were (`data_source_record`), for the results."""
        self.evaluation_split = list(config.evaluation_splits)

        self.fewshot_split: str | None = config.few_shots_split or self.get_first_possible_fewshot_splits(
            config.hf_avail_splits or []
        )
        self.fewshot_selection = config.few_shots_select
        self.fewshot_draws = FewShotDraws(config.fewshot_draws or default_draws(self.suite[0]))
        self.fewshot_self_draws = 0  # lighteval-mode docs whose own row was drawn (their prompt differs)
        self.fewshot_short_docs = 0  # lighteval-mode docs given fewer examples than asked for
        self.must_remove_duplicate_docs = config.must_remove_duplicate_docs
        self.formatter = config.prompt_function

        self.metrics = list(config.metrics)
        self.sampling_methods: list[SamplingMethod] = list(dict.fromkeys(m.category for m in self.metrics))

        self.generation_size = config.generation_size
        self.generation_grammar = config.generation_grammar
        self.stop_sequence = list(config.stop_sequence or [])
        self.num_samples = [1, *(config.num_samples or []), *metric_samples(self.metrics)]
        self.generation_parameters = config.generation_parameters

        self._docs: list[Doc] | None = None
        self._doc_keys: list[DocKey] = []
        self._fewshot_docs: list[Doc] | None = None
        self._fewshot_keys: list[DocKey] = []
        self._fewshot_contents: list[tuple] | None = None
        self._sampler: FewShotSampler | None = None

    def __repr__(self) -> str:
        return f"LightevalTask({self.full_name!r})"

    def get_first_possible_fewshot_splits(self, available_splits: list[str] | tuple[str, ...]) -> str | None:
        """The first non-evaluation split whose name contains train, then dev, valid, default.

        Returns None (few-shot examples then come from the evaluation splits) when none matches.
        """
        candidates = [split for split in available_splits if split not in self.evaluation_split]
        for keyword in FEWSHOT_SPLIT_KEYWORDS:
            for split in candidates:
                if keyword in split:
                    return split
        if self.config.num_fewshots > 0:
            logger.warning(
                "Task %s takes its few-shot examples from its evaluation split(s); a doc is never its own example.",
                self.full_name,
            )
        return None

    def _dataset_source(self) -> DatasetSource:
        return DatasetSource(
            task_name=self.full_name,
            hf_repo=self.dataset_path,
            hf_subset=self.dataset_config_name,
            hf_revision=self.dataset_revision,
            data_dirs=tuple(get_data_dirs()),
            data_files=self.config.hf_data_files,
        )

    def _apply_filter(self, dataset: Any) -> Any:
        if self.dataset_filter is None:
            return dataset
        return dataset.filter(self.dataset_filter)

    def _docs_from_splits(self, splits: list[str], few_shots: bool) -> tuple[list[Doc], list[DocKey]]:
        if self.dataset is None:
            self.dataset = self.download_dataset_worker(self)
        docs: list[Doc] = []
        keys: list[DocKey] = []
        for split in splits:
            if split not in self.dataset:
                raise DatasetLoadError(
                    f"Task {self.full_name!r}: split {split!r} is not in dataset {self.dataset_path!r} "
                    f"subset {self.dataset_config_name!r} (available: {sorted(self.dataset)}; {self._read_from()}). "
                    f"Fix the task's evaluation_splits / few_shots_split, or add {split}.jsonl to the subset folder "
                    "of your data dir."
                )
            for index, row in enumerate(self.dataset[split]):
                doc = self._format_row(dict(row), split, index, few_shots)
                if doc is not None:
                    doc.id = str(index) if len(splits) == 1 else f"{split}-{index}"
                    docs.append(doc)
                    keys.append((split, index))
        return docs, keys

    def _read_from(self) -> str:
        """Where the dataset's rows were read from, for errors about them."""
        if self.data_origin is not None:
            return f"read from {self.data_origin.describe()}"
        return describe_data_dirs(tuple(get_data_dirs()))

    def _format_row(self, row: dict, split: str, index: int, few_shots: bool) -> Doc | None:
        # lighteval passes these two keys to prompt functions; some built-in prompts read them.
        row["__few_shots"] = few_shots
        row["__index"] = index
        try:
            doc = self.formatter(row, self.name)
        except Exception as error:
            raise PromptFunctionError(
                f"Task {self.full_name!r}: prompt function "
                f"{getattr(self.formatter, '__qualname__', self.formatter)!r} raised on row {index} of split "
                f"{split!r} ({type(error).__name__}: {error}; {self._read_from()}). Fix the prompt function or "
                "filter that row out with hf_filter."
            ) from error
        if doc is not None and not isinstance(doc, Doc) and is_lighteval_object(doc):
            from lighteval_nanotron.tasks.lighteval_adapter.configs import adapt_doc

            doc = adapt_doc(doc)  # lighteval's Doc from a prompt function of this project's config
        if doc is not None and not isinstance(doc, Doc):
            raise PromptFunctionError(
                f"Task {self.full_name!r}: prompt function returned {type(doc).__name__} on row {index} of "
                f"split {split!r}; it must return a Doc or None."
            )
        if doc is not None and _has_images(doc):
            raise PromptFunctionError(
                f"Task {self.full_name!r}: prompt function returned a Doc with images on row "
                f"{index} of split {split!r}: a multimodal task. The models evaluated here read text only, and "
                "scoring the text without its images is not this benchmark. Evaluate it with a vision-language "
                "model (lighteval's VLM backend), or return no images if the task is meant to be text-only."
            )
        if doc is not None and isinstance(doc.choices, str):  # each character would be scored as a choice
            raise PromptFunctionError(
                f"Task {self.full_name!r}: prompt function returned choices={doc.choices!r} (a string) on row "
                f"{index} of split {split!r}; Doc.choices is a list of texts: fix the prompt function or that row."
            )
        return doc

    def fewshot_docs(self) -> list[Doc]:
        """The few-shot pool: docs of the few-shot split, else of the evaluation splits."""
        if self._fewshot_docs is None:
            splits = [self.fewshot_split] if self.fewshot_split is not None else self.evaluation_split
            self._fewshot_docs, self._fewshot_keys = self._docs_from_splits(splits, few_shots=True)
        return self._fewshot_docs

    def eval_docs(self) -> list[Doc]:
        """The evaluation docs in dataset order (duplicates dropped if the config asks for it)."""
        if self._docs is None:
            docs, keys = self._docs_from_splits(self.evaluation_split, few_shots=False)
            if self.must_remove_duplicate_docs:
                docs, keys = _drop_duplicates(docs, keys)
            self._docs, self._doc_keys = docs, keys
            self.config.original_num_docs = len(docs)
        return self._docs

    def _fewshot_sampler(self) -> FewShotSampler:
        if self._sampler is None:
            self._sampler = FewShotSampler(self.fewshot_selection, self.fewshot_docs(), seed=FEWSHOT_SEED)
        return self._sampler

    def _is_self(self, doc: Doc, key: DocKey) -> Callable[[int], bool]:
        """Whether pool doc `index` is `doc` itself: the same row, or the same query, choices and gold."""
        if self._fewshot_contents is None:
            self._fewshot_contents = [_content_key(example) for example in self.fewshot_docs()]
        pool_contents, content = self._fewshot_contents, _content_key(doc)
        return lambda index: self._fewshot_keys[index] == key or pool_contents[index] == content

    def _per_doc_fewshots(self, doc: Doc, key: DocKey) -> list[Doc]:
        if self.config.num_fewshots <= 0:
            return []
        return self._fewshot_sampler().sample(
            self.config.num_fewshots, doc_key=f"{key[0]}:{key[1]}", is_self=self._is_self(doc, key)
        )

    def _lighteval_fewshots(self, doc: Doc, key: DocKey, draws: LightevalFewShotDraws, rng: random.Random) -> list[Doc]:
        """lighteval's examples for the next doc, without the doc itself.

        `random_sampling_from_train` draws exactly `num_fewshots`: a dropped self is replaced by
        the first other pool doc in pool order, so the doc still gets `num_fewshots` examples.
        """
        num_fewshots = self.config.num_fewshots
        if num_fewshots <= 0:  # a 0-shot task never opens its few-shot split
            return []
        candidates = draws.candidates(rng)
        is_self = self._is_self(doc, key)
        if any(is_self(index) for index in candidates[:num_fewshots]):
            self.fewshot_self_draws += 1
        picked = list(islice((index for index in candidates if not is_self(index)), num_fewshots))
        if len(picked) < num_fewshots:
            drawn = set(candidates)
            spare = (i for i in draws.order if i not in drawn and not is_self(i))
            picked.extend(islice(spare, num_fewshots - len(picked)))
        if len(picked) < num_fewshots:
            self.fewshot_short_docs += 1
        pool = self.fewshot_docs()
        return [pool[index] for index in picked]

    def _doc_order_and_fewshots(self, max_samples: int | None) -> list[tuple[int, list[Doc]]]:
        """(eval doc index, few-shot examples) in evaluation order, for the task's draw mode."""
        eval_docs = self.eval_docs()
        rng = random.Random(DOC_SHUFFLE_SEED)
        order = shuffled_doc_order(len(eval_docs), rng)
        if max_samples is not None and max_samples > 0:
            order = order[:max_samples]
        if self.fewshot_draws is FewShotDraws.per_doc:
            return [(index, self._per_doc_fewshots(eval_docs[index], self._doc_keys[index])) for index in order]
        self.fewshot_self_draws = self.fewshot_short_docs = 0
        num_fewshots = self.config.num_fewshots
        pool = self.fewshot_docs() if num_fewshots > 0 else []
        draws = LightevalFewShotDraws(self.fewshot_selection, pool, num_fewshots, self.full_name, seed=FEWSHOT_SEED)
        out = [
            (index, self._lighteval_fewshots(eval_docs[index], self._doc_keys[index], draws, rng)) for index in order
        ]
        if self.fewshot_self_draws:
            logger.warning(
                "Task %s: %d doc(s) drew themselves as a few-shot example; they were dropped, so these "
                "prompts differ from lighteval %s's (which shows a doc its own answer there).",
                self.full_name,
                self.fewshot_self_draws,
                LIGHTEVAL_VERSION,
            )
        if self.fewshot_short_docs:
            logger.warning(
                "Task %s: %d doc(s) get fewer than %d few-shot examples, as in lighteval %s (%s selection: "
                "a small pool, or a class with an empty label ends lighteval's balanced selection); set "
                "fewshot_draws='per_doc' to get %d where the pool allows.",
                self.full_name,
                self.fewshot_short_docs,
                num_fewshots,
                LIGHTEVAL_VERSION,
                draws.method.value,
                num_fewshots,
            )
        return out

    def set_fewshot_draws(self, draws: str) -> None:
        """Use `lighteval` or `per_doc` few-shot draws from the next `get_docs()` on."""
        if draws not in FewShotDraws.names():
            raise ConfigError(
                f"fewshot_draws={draws!r} is not one of {', '.join(FewShotDraws.names())} (task {self.full_name})."
            )
        self.fewshot_draws = FewShotDraws(draws)

    def fewshot_record(self) -> dict[str, Any]:
        """How the few-shot examples were drawn, for results files: equal records, same draws."""
        record: dict[str, Any] = {
            "draws": self.fewshot_draws.value,
            "select": self.fewshot_selection or "balanced",
            "num_fewshots": self.config.num_fewshots,
            "seed": FEWSHOT_SEED,
            "doc_shuffle_seed": DOC_SHUFFLE_SEED,
        }
        if self.fewshot_draws is FewShotDraws.lighteval:
            record["same_draws_as"] = f"lighteval=={LIGHTEVAL_VERSION}"
            record["docs_with_self_drawn"] = self.fewshot_self_draws
            record["docs_with_fewer_examples"] = self.fewshot_short_docs
        return record

    def get_docs(self, max_samples: int | None = None) -> list[Doc]:
        """Evaluation docs ready to run: a fixed shuffle, cut to `max_samples`, with few-shots set.

        Returns fresh copies: calling it again returns equal docs and leaves the cached ones as is.
        """
        eval_docs = self.eval_docs()
        if not eval_docs:
            raise DatasetLoadError(
                f"Task {self.full_name!r} has no documents in splits {self.evaluation_split} "
                "(empty split, or every row filtered out by hf_filter / the prompt function)."
            )
        num_samples = max(self.num_samples)
        docs = []
        for index, fewshots in self._doc_order_and_fewshots(max_samples):
            docs.append(
                dataclasses.replace(
                    eval_docs[index],
                    task_name=self.full_name,
                    fewshot_samples=fewshots,
                    sampling_methods=list(self.sampling_methods),
                    generation_size=self.generation_size,
                    generation_grammar=self.generation_grammar,
                    stop_sequences=list(self.stop_sequence),
                    num_samples=num_samples,
                    generation_parameters=self.generation_parameters,
                )
            )
        self.config.effective_num_docs = len(docs)
        return docs

    def data_source_record(self, max_samples: int | None) -> dict[str, Any]:
        """Where this task's docs came from (`DataOrigin`: data dir, shipped slice, Hub and revision),
        the rows of its evaluation splits, and the cap asked (`max_samples`) and met. lighteval's
        `original_num_docs` counts the docs of the splits as loaded: a slice's, not the benchmark's."""
        origin = self.data_origin.to_dict() if self.data_origin is not None else {}
        asked = max_samples if max_samples is not None and max_samples > 0 else None
        return {
            **origin,
            "hf_repo": self.dataset_path,
            "hf_subset": self.dataset_config_name,
            "slice": bool(self.data_origin is not None and self.data_origin.is_slice),
            "rows": {split: len(self.dataset[split]) for split in self.evaluation_split if split in self.dataset},
            "docs_available": self.config.original_num_docs,
            "max_samples": asked,
            "docs_evaluated": self.config.effective_num_docs,
            "cap_met": asked is None or self.config.effective_num_docs >= asked,
        }

    def aggregation(self) -> dict[str, Any]:
        """Metric name -> corpus aggregation function, over all metrics of the task."""
        aggregations: dict[str, Any] = {}
        for metric in self.metrics:
            aggregations.update(metric.get_corpus_aggregations())
        return aggregations

    @staticmethod
    def download_dataset_worker(task: LightevalTask) -> Any:
        """Load the task's dataset (data dirs, else the Hub), then apply `hf_filter`; where it came
        from goes to `task.data_origin`."""
        loaded = load_source(task._dataset_source())
        task.data_origin = loaded.origin
        return task._apply_filter(loaded.dataset)

    @staticmethod
    def load_datasets(tasks: dict[str, LightevalTask], dataset_loading_processes: int = 1) -> None:
        """Load the datasets of `tasks`, in parallel with several processes (one task per job).

        Workers get only picklable dataset sources and return results in task order; filters run
        in this process, so lambdas and functions of custom task files work.
        """
        pending = [task for task in tasks.values() if task.dataset is None]
        sources = [task._dataset_source() for task in pending]
        if dataset_loading_processes <= 1 or len(sources) <= 1:
            datasets = [load_source(source) for source in sources]
        else:
            context = multiprocessing.get_context("spawn")  # forking a process with threads is unsafe
            with context.Pool(processes=min(dataset_loading_processes, len(sources))) as pool:
                datasets = pool.map(load_source, sources, chunksize=1)
        for task, loaded in zip(pending, datasets):
            task.data_origin = loaded.origin
            task.dataset = task._apply_filter(loaded.dataset)
