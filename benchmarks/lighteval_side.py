"""lighteval's own pipeline on the benchmark's documents, in a process of its own.

Used by `benchmarks/lighteval_compare.py` (the comparison of `bench_eval.py --lighteval`); it
needs the `lighteval` extra (`pip install -e '.[lighteval]'`: lighteval 0.11 to 0.13).

What lighteval runs, and the only places where the benchmark steps in:

- **The model**: lighteval's `TransformersModel` on an HF copy of the benchmark's checkpoint
  (`hf_copy`: the converter's export `nanotron_to_hf`, saved with `save_pretrained`, the
  checkpoint's tokenizer files beside it), fp32, on the CPU, with the same threads as the engine
  (`torch.set_num_threads`), loaded once and reused by every pipeline of the process.
- **The tasks**: one lighteval `LightevalTaskConfig` per task of this project (same dataset,
  splits, few-shot split and selection, generation size, stop sequences, and this project's
  prompt function, its `Doc` copied field by field into lighteval's): lighteval then does
  everything else itself (doc shuffle and `max_samples` cut, few-shot draws, prompt text,
  tokenization, batching, the model calls, the metrics). lighteval's registry imports every task
  file of its catalogue, some of which reach the network at import, so `Registry` reads only
  these configs (`load_all_task_configs` is replaced while a pipeline is built).
- **The data**: `LightevalTask.download_dataset_worker` (lighteval's documented test hook) reads
  the dataset through this project's data layer (the same local files the engine reads).
- **Per-task doc counts**: lighteval's `max_samples` is one number for all tasks; each task's
  `get_docs` gets its own count (the first n of lighteval's own shuffled order).
- **The model is kept** for the next pipeline: `TransformersModel.cleanup` (which deletes it at the
  end of `_run_model`) does nothing.
- **lighteval's sample cache** is off (`model._cache = None` once the pipeline is built), so no
  run reads another's results (it would also spend time writing them: left out, in lighteval's
  favour).
- **Positions**: after the timer, each log-likelihood doc's prompt and choices are tokenized again
  by lighteval (`tok_encode_pair`) to count the positions its model ran (context + continuation
  per choice; the padding of its batches not counted: a lower bound).
- **xxhash >= 4** refuses the `str` lighteval's details logger hashes: it gets the UTF-8 bytes.

Timed: `Pipeline._run_model` (every model call, lighteval's tokenization included), wall and
CPU seconds of the process; peak memory is the process's resident peak during the run (reset
before it). Metrics are computed by lighteval after the timer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

HF_COPY_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def hf_copy(checkpoint: Path, folder: Path) -> Path:
    """The checkpoint as a Hugging Face Llama folder (written once, by the converter's export)."""
    if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
        return folder
    from transformers import LlamaConfig, LlamaForCausalLM

    from lighteval_nanotron.convert import nanotron_to_hf

    hf_config, weights = nanotron_to_hf(checkpoint)
    model = LlamaForCausalLM(LlamaConfig(**hf_config))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise RuntimeError(f"HF copy of {checkpoint}: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".partial"))
    model.save_pretrained(partial, safe_serialization=True)
    for name in HF_COPY_FILES:
        if (checkpoint / name).is_file():
            shutil.copy2(checkpoint / name, partial / name)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


# ------------------------------------------------------------------ lighteval's view of our tasks


def _lighteval_doc(doc: Any) -> Any:
    """This project's `Doc` as lighteval's (the fields both have)."""
    from lighteval.tasks.requests import Doc

    names = {f.name for f in dataclasses.fields(Doc)}
    kept = ("query", "choices", "gold_index", "instruction", "specific", "unconditioned_query", "original_query")
    fields = {name: getattr(doc, name) for name in kept if name in names}
    fields["choices"] = list(doc.choices)
    if "fewshot_sorting_class" in names:
        fields["fewshot_sorting_class"] = doc.fewshot_sorting_class
    return Doc(**fields)


@dataclasses.dataclass
class _Prompt:
    """This project's prompt function, returning lighteval's `Doc`."""

    function: Any

    def __call__(self, line: dict, task_name: str) -> Any:
        doc = self.function(line, task_name)
        return None if doc is None else _lighteval_doc(doc)


def _suite_and_name(full_name: str) -> tuple[str, str, int]:
    suite, name, shots = full_name.split("|")
    return suite, name, int(shots)


def lighteval_configs(project_tasks: dict[str, Any]) -> dict[str, Any]:
    """lighteval task configs of this project's tasks, keyed by this project's full task name."""
    import lighteval
    from lighteval.metrics.metrics import Metrics
    from lighteval.tasks.lighteval_task import LightevalTaskConfig
    from lighteval.tasks.requests import SamplingMethod as LightevalSampling

    from lighteval_nanotron.requests import SamplingMethod

    accepts_suite = "suite" in {f.name for f in dataclasses.fields(LightevalTaskConfig)}
    configs = {}
    for full_name, task in project_tasks.items():
        config = task.config
        suite, name, _ = _suite_and_name(full_name)
        generative = SamplingMethod.GENERATIVE in task.sampling_methods
        metric = Metrics.exact_match if generative else Metrics.loglikelihood_acc
        assert metric.value.category is (LightevalSampling.GENERATIVE if generative else LightevalSampling.LOGPROBS), (
            lighteval.__version__
        )
        fields = dict(
            name=name,
            prompt_function=_Prompt(config.prompt_function),
            hf_repo=config.hf_repo,
            hf_subset=config.hf_subset,
            hf_revision=config.hf_revision,
            hf_filter=config.hf_filter,
            hf_avail_splits=list(config.hf_avail_splits),
            evaluation_splits=list(config.evaluation_splits),
            few_shots_split=config.few_shots_split,
            few_shots_select=config.few_shots_select,
            generation_size=config.generation_size,
            stop_sequence=list(config.stop_sequence or []),
            metrics=[metric.value],
            must_remove_duplicate_docs=config.must_remove_duplicate_docs,
        )
        if accepts_suite:
            fields["suite"] = [suite]
        configs[full_name] = LightevalTaskConfig(**fields)
    return configs


def _task_spec(full_name: str, accepts_suite: bool) -> str:
    suite, name, shots = _suite_and_name(full_name)
    return f"{suite}|{name}|{shots}" if accepts_suite else f"{name}|{shots}"


@contextlib.contextmanager
def _lighteval_reads_our_tasks(configs: list[Any], counts: dict[str, int]) -> Iterator[None]:
    """While a pipeline is built and run: lighteval's registry knows only `configs`, its datasets
    come through this project's data layer, and each task's `get_docs` takes its own doc count."""
    from lighteval.logging import info_loggers
    from lighteval.tasks.lighteval_task import LightevalTask
    from lighteval.tasks.registry import Registry

    from lighteval_nanotron.tasks.data_dirs import DatasetSource, get_data_dirs, load_source

    def our_configs(custom_tasks: Any = None, load_multilingual: bool = False) -> dict[str, Any]:
        return {_registry_key(config): config for config in configs}

    def our_data(task: Any) -> Any:
        source = DatasetSource(
            task_name=task.name,
            hf_repo=task.dataset_path,
            hf_subset=task.dataset_config_name,
            hf_revision=task.dataset_revision,
            data_dirs=tuple(get_data_dirs()),
        )
        dataset = load_source(source).dataset
        return dataset if task.dataset_filter is None else dataset.filter(task.dataset_filter)

    original_get_docs = LightevalTask.get_docs

    def counted_docs(task: Any, max_samples: int | None = None) -> list:
        return original_get_docs(task, counts.get(_full_name(task), max_samples))

    saved = (
        Registry.load_all_task_configs,
        LightevalTask.download_dataset_worker,
        LightevalTask.get_docs,
        info_loggers.xxhash,
    )
    Registry.load_all_task_configs = staticmethod(our_configs)
    LightevalTask.download_dataset_worker = staticmethod(our_data)
    LightevalTask.get_docs = counted_docs
    info_loggers.xxhash = _Utf8XXHash
    try:
        yield
    finally:
        Registry.load_all_task_configs = staticmethod(saved[0])
        LightevalTask.download_dataset_worker = staticmethod(saved[1])
        LightevalTask.get_docs = saved[2]
        info_loggers.xxhash = saved[3]


class _Utf8XXHash:
    """lighteval's details logger hashes `str` with xxhash, which xxhash >= 4 refuses: the UTF-8
    bytes, as xxhash < 4 hashed them."""

    @staticmethod
    def xxh64(text: str | bytes) -> Any:
        import xxhash

        return xxhash.xxh64(text.encode("utf-8") if isinstance(text, str) else text)


def _registry_key(config: Any) -> str:
    """The name lighteval's registry files a config under (0.11: `suite|name`; 0.12+: `name`)."""
    suite = getattr(config, "suite", None)
    return f"{suite[0]}|{config.name}" if suite else config.name


def _full_name(task: Any) -> str:
    """A lighteval task's name as this project writes it (`suite|name|shots`)."""
    config = task.config if hasattr(task, "config") else task
    suite = getattr(config, "suite", None)
    return f"{suite[0] if suite else _OUR_SUITES[config.name]}|{config.name}|{config.num_fewshots}"


_OUR_SUITES: dict[str, str] = {}


# ------------------------------------------------------------------ the process


def _reset_peak_memory() -> None:
    """Reset the process's resident-memory peak (Linux: VmHWM), so a run reports its own peak."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _peak_memory_mb() -> float:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class LightevalRunner:
    """lighteval's model, loaded once, and its pipeline run on a set of this project's tasks."""

    def __init__(self, hf_folder: str, threads: int, batch_size: int, docs: dict[str, int], max_new_tokens: int | None):
        import torch

        torch.set_num_threads(threads)
        from lighteval_nanotron.nanotron_compat.flash_attn_fallback import install_flash_attn_fallback
        from lighteval_nanotron.nanotron_compat.imports import import_nanotron

        # lighteval's pipeline and tracker import Nanotron when it is installed: its modules in an
        # order that works, and the flash-attn stand-in its Llama imports (the HF model uses neither)
        install_flash_attn_fallback(force=True)
        import_nanotron()
        from lighteval.models.transformers.transformers_model import TransformersModel, TransformersModelConfig

        from lighteval_nanotron.tasks import Registry as ProjectRegistry

        self.counts = dict(docs)
        tasks = ProjectRegistry(",".join(self.counts)).load_tasks()
        if max_new_tokens is not None:
            for task in tasks.values():
                if task.generation_size:
                    task.config.generation_size = min(task.generation_size, max_new_tokens)
        self.configs = lighteval_configs(tasks)
        for full_name in self.configs:
            suite, name, _ = _suite_and_name(full_name)
            _OUR_SUITES[name] = suite
        self.cache_dir = tempfile.mkdtemp(prefix="lighteval-cache-")
        config = TransformersModelConfig(
            model_name=hf_folder,
            dtype="float32",
            device="cpu",
            batch_size=batch_size,
            cache_dir=self.cache_dir,
            override_chat_template=False,  # plain-text prompts, as the engine evaluates
        )
        self.model = TransformersModel(config)
        self.sample_cache = self.model._cache  # the pipeline registers its tasks there, then it is turned off
        self.model.cleanup = lambda: None  # `_run_model` ends with it (deletes the model): kept for the next run
        self.threads = threads

    def run(self, task_names: list[str]) -> dict:
        """lighteval's pipeline on these tasks: seconds, CPU seconds, peak memory, per-doc answers."""
        from lighteval.logging.evaluation_tracker import EvaluationTracker
        from lighteval.pipeline import ParallelismManager, Pipeline, PipelineParameters
        from lighteval.tasks.lighteval_task import LightevalTaskConfig

        accepts_suite = "suite" in {f.name for f in dataclasses.fields(LightevalTaskConfig)}
        configs = [self.configs[name] for name in task_names]
        counts = {name: self.counts[name] for name in task_names}
        with tempfile.TemporaryDirectory() as out, _lighteval_reads_our_tasks(configs, counts):
            self.model._cache = self.sample_cache
            pipeline = Pipeline(
                tasks=",".join(_task_spec(name, accepts_suite) for name in task_names),
                pipeline_parameters=PipelineParameters(launcher_type=ParallelismManager.NONE),
                evaluation_tracker=EvaluationTracker(output_dir=out, save_details=False),
                model=self.model,
            )
            pipeline.model._cache = None
            run_model = pipeline._run_model
            timing: dict[str, Any] = {}

            def timed_run_model() -> dict:
                _reset_peak_memory()
                start, cpu = time.perf_counter(), time.process_time()
                outputs = run_model()
                timing.update(
                    eval_s=time.perf_counter() - start,
                    cpu_s=time.process_time() - cpu,
                    peak_memory_mb=_peak_memory_mb(),
                    outputs=outputs,
                )
                return outputs

            pipeline._run_model = timed_run_model
            pipeline.evaluate()
        answers: dict[str, list[dict]] = {name: [] for name in task_names}
        for method, responses in timing.pop("outputs").items():
            for doc, response in zip(pipeline.sampling_docs[method], responses):
                answers[_full_name_of_doc(doc, accepts_suite)].append(_answer(doc, response, pipeline))
        positions = sum(answer["positions"] for task in answers.values() for answer in task)
        return {**timing, "docs": sum(len(a) for a in answers.values()), "positions": positions, "answers": answers}


def _full_name_of_doc(doc: Any, accepts_suite: bool) -> str:
    """`suite|name|shots` of a lighteval doc's `task_name` (0.11: `suite|name|shots`, 0.12+: `name|shots`)."""
    if accepts_suite:
        return doc.task_name
    name, shots = doc.task_name.split("|")
    return f"{_OUR_SUITES[name]}|{name}|{shots}"


def _answer(doc: Any, response: Any, pipeline: Any) -> dict:
    """What the comparison reads of one lighteval answer: the doc, its prompt and the model's output."""
    prompt = pipeline.model.prompt_manager.prepare_prompt(doc)
    positions = 0
    if not response.text:  # log-likelihood: one row per choice, the context in each (padding not counted)
        pairs = pipeline.model.tok_encode_pair(prompt, list(doc.choices), pairwise=True)
        positions = sum(len(context) + len(continuation) for context, continuation in zip(*pairs))
    return {
        "positions": positions,
        "query": doc.query,
        "choices": list(doc.choices),
        "prompt": prompt if isinstance(prompt, str) else str(prompt),
        "logprobs": [float(x) for x in (response.logprobs or [])],
        "text": list(response.text or []),
    }


def serve(
    connection: Any, hf_folder: str, threads: int, batch_size: int, docs: dict, max_new_tokens: int | None
) -> None:
    """The lighteval process: load the model, then run each list of task names it is sent
    (None ends it), answering each with `LightevalRunner.run`'s record or an error text."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import traceback

    try:
        runner = LightevalRunner(hf_folder, threads, batch_size, docs, max_new_tokens)
        connection.send(("ready", None))
    except BaseException:
        connection.send(("error", traceback.format_exc()))
        return
    while True:
        names = connection.recv()
        if names is None:
            return
        try:
            connection.send(("done", runner.run(names)))
        except BaseException:
            connection.send(("error", traceback.format_exc()))
