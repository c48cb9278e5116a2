"""`lighteval-nanotron tasks`: list the registered tasks, or show the prompts of a task spec.

Usage:
    lighteval-nanotron tasks list --suites lighteval,leaderboard
    lighteval-nanotron tasks list --suites all --custom-tasks my_tasks.py
    lighteval-nanotron tasks inspect "lighteval|arc:easy|5" --num-docs 2 --data-dir bundled
    lighteval-nanotron tasks inspect "custom|my_task|3" --custom-tasks my_tasks.py --data-dir ./data

`inspect` prints, for the first N docs of each task (in evaluation order), the full context as a
base model sees it (plain-text prompt with the few-shot examples), the choices and the golds.
"""

from __future__ import annotations

import argparse

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.tasks import LightevalTask, PromptManager, Registry, get_data_dirs, set_data_dirs
from lighteval_nanotron.tasks.lighteval_adapter import installed_version
from lighteval_nanotron.tasks.tables import SUITE_TABLE_MODULES


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `tasks` verb (with `list` and `inspect`) to the `lighteval-nanotron` parser."""
    parser = subparsers.add_parser(
        "tasks",
        help="list tasks or inspect their prompts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")

    list_parser = actions.add_parser("list", help="list the registered tasks by suite")
    list_parser.add_argument(
        "--suites",
        nargs="+",
        default=None,
        help="suites to show (comma or space separated; 'all' for every suite; default: core)",
    )
    list_parser.add_argument("--custom-tasks", default=None, help="custom tasks .py file or module name")
    list_parser.set_defaults(func=run_list)

    inspect_parser = actions.add_parser("inspect", help="print the rendered prompts, choices and golds of a task spec")
    inspect_parser.add_argument("spec", help='task spec(s), e.g. "lighteval|arc:easy|5" or a task-list file')
    inspect_parser.add_argument("--num-docs", type=int, default=3, help="docs to show per task (default: 3)")
    inspect_parser.add_argument("--custom-tasks", default=None, help="custom tasks .py file or module name")
    inspect_parser.add_argument(
        "--data-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="data dir searched before $LIGHTEVAL_NANOTRON_DATA_DIRS (repeatable; 'bundled' or HF_REPO=PATH also work)",
    )
    inspect_parser.add_argument("--system-prompt", default=None, help="system prompt to prepend")
    inspect_parser.set_defaults(func=run_inspect)
    return parser


def run_list(args: argparse.Namespace) -> int:
    suites = None
    if args.suites:
        suites = [s.strip() for item in args.suites for s in item.split(",") if s.strip()]
    registry = Registry(custom_tasks=args.custom_tasks)
    empty = registry.suites_without_tasks(suites or [])
    if empty:
        registry.task_names(list(SUITE_TABLE_MODULES))  # every optional suite, to list what exists
        known = sorted({name.split("|", 1)[0] for name in registry.task_names()})
        catalogue = (
            "--suites all also lists lighteval's catalogue"
            if installed_version() is not None
            else "a suite of lighteval's catalogue needs `pip install 'lighteval-nanotron[lighteval]'`"
        )
        raise ConfigError(
            f"no task in suite(s) {', '.join(empty)}: the suites with tasks are {', '.join(known)} ({catalogue})."
        )
    registry.print_all_tasks(suites)
    return 0


def _describe(task: LightevalTask) -> str:
    metrics = ", ".join(str(getattr(m, "metric_name", m)) for m in task.metrics) or "none"
    fewshot = task.fewshot_split or f"{'+'.join(task.evaluation_split)} (evaluation split)"
    return (
        f"dataset {task.dataset_path} / {task.dataset_config_name}, eval splits {'+'.join(task.evaluation_split)}, "
        f"{task.config.num_fewshots}-shot from {fewshot} ({task.fewshot_selection or 'balanced'}, "
        f"{task.fewshot_draws.value} draws), metrics: {metrics}"
    )


def format_doc(index: int, doc, prompt: str) -> str:
    lines = [
        f"--- doc {index} (id {doc.id}, {'/'.join(m.value for m in doc.sampling_methods) or 'no metric'}) ---",
        "[context]",
        prompt,
        "[choices]",
    ]
    gold_indices = doc.gold_index if isinstance(doc.gold_index, list) else [doc.gold_index]
    for choice_index, choice in enumerate(doc.choices):
        mark = "  <- gold" if choice_index in gold_indices else ""
        lines.append(f"  {choice_index}: {choice!r}{mark}")
    lines.append(f"[golds] {doc.get_golds()!r}")
    if doc.generation_size is not None or doc.stop_sequences:
        lines.append(f"[generation] max {doc.generation_size} tokens, stop at {doc.stop_sequences!r}")
    return "\n".join(lines)


def run_inspect(args: argparse.Namespace) -> int:
    if args.data_dir:
        set_data_dirs([*args.data_dir, *get_data_dirs()])
    tasks = Registry(tasks=args.spec, custom_tasks=args.custom_tasks).load_tasks()
    prompts = PromptManager(system_prompt=args.system_prompt)
    for full_name, task in tasks.items():
        docs = task.get_docs(max_samples=args.num_docs)
        print(f"=== {full_name}: {len(task.eval_docs())} docs; {_describe(task)} ===")
        for index, doc in enumerate(docs):
            print(format_doc(index, doc, prompts.prepare_prompt(doc)))
        print()
    return 0
