"""The engine against lighteval's own pipeline, side by side in one run of `bench_eval.py`.

With lighteval installed (the `lighteval` extra), `bench_eval.py --lighteval on` (the default
`auto`: when lighteval is importable) starts one lighteval process (`lighteval_side.py`: its
`TransformersModel` on an HF copy of the same checkpoint, the same threads) next to the engine's
ranks. Each timed item of the engine's `on` setting (the mix, then each task alone) is paired
with lighteval's pipeline on the same tasks and docs, the two never running at once, in ABBA
order (the engine first for even items, lighteval first for odd ones), so slow drifts of a
shared machine's load hit both sides alike. The engine's ranks wait for each lighteval run on
their own pipe (no collective is left waiting). Printed per item: seconds (wall) and CPU seconds
of each side, docs/s, peak resident memory, and the ratios lighteval / engine; and the per-doc
comparison of the mix (the same doc and prompt on both sides, the same prediction: the argmax
choice of a log-likelihood doc, the text of a generation; differences listed).

`--background-load N` (a comma list, e.g. `0,2`) runs the whole comparison once per value with N
busy processes of this benchmark's own (one pure-Python spinning loop each) on the machine: the
ratio under a fixed synthetic load beside the quiet one.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import multiprocessing
import os
from pathlib import Path
from typing import Any, Iterator

LOGPROB_TOLERANCE = (1e-3, 1e-4)
"""A log-prob differs when |ours - lighteval's| > 1e-3 + 1e-4 x |lighteval's| (fp32 kernels of
different shapes and batch layouts round differently; a changed prediction is always listed)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--lighteval",
        choices=("auto", "on", "off"),
        default="auto",
        help="run lighteval's own pipeline beside the engine's `on` setting (auto: when lighteval is installed)",
    )
    parser.add_argument(
        "--lighteval-batch-size",
        type=int,
        default=64,
        help="lighteval's batch_size (rows: its log-likelihood batches hold batch_size / choices docs, rounded to 8)",
    )
    parser.add_argument(
        "--background-load",
        default="0",
        help="comma list of busy-process counts: the comparison runs once per value with that many spinning "
        "processes started by the benchmark (e.g. 0,2)",
    )


def wanted(mode: str) -> bool:
    """Whether the comparison runs: `on`, or `auto` with lighteval importable."""
    if mode == "on" and importlib.util.find_spec("lighteval") is None:
        raise SystemExit("error: --lighteval on needs lighteval: pip install -e '.[lighteval]'")
    return mode == "on" or (mode == "auto" and importlib.util.find_spec("lighteval") is not None)


# ------------------------------------------------------------------ the engine's ranks


class Gate:
    """A rank's side of the interleaving: around each timed item, the reporting rank tells the
    controller, and every rank waits on its own pipe until lighteval's run of the item is over."""

    def __init__(self, connection: Any, reporting: bool):
        self.connection = connection
        self.reporting = reporting

    @contextlib.contextmanager
    def item(self, name: str) -> Iterator[None]:
        self._signal("before", name)
        yield
        self._signal("after", name)

    def _signal(self, when: str, name: str) -> None:
        if self.reporting:
            self.connection.send((when, name))
        reply = self.connection.recv()
        if reply != "go":
            raise RuntimeError(f"the lighteval side failed; the controller said: {reply}")


def open_gate(args: dict, rank: int) -> Gate | contextlib.nullcontext:
    connection = args.get("gate_connections", {}).get(rank)
    return Gate(connection, rank == 0) if connection is not None else None


@contextlib.contextmanager
def paired(gate: Gate | None, name: str) -> Iterator[None]:
    """The engine's timed item `name`, paired with lighteval's (nothing without a gate)."""
    if gate is None:
        yield
        return
    with gate.item(name):
        yield


def reset_peak_memory() -> None:
    """Reset this process's resident-memory peak (Linux VmHWM): the next reading is this item's."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_memory_mb() -> float:
    """This process's resident-memory peak since the last reset (MB)."""
    import resource

    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def engine_answers(groups: list, responses: list, prompt_fn: Any) -> dict[str, list[dict]]:
    """The engine's answers per task, in doc order (what `compare_answers` reads)."""
    from lighteval_nanotron.requests import SamplingMethod

    answers: dict[str, dict[int, dict]] = {}
    for group, group_responses in zip(groups, responses):
        for doc, task, index, response in zip(group.docs, group.task_names, group.doc_indices, group_responses):
            entry = answers.setdefault(task, {}).setdefault(
                index, {"query": doc.query, "choices": list(doc.choices), "prompt": prompt_fn(doc)}
            )
            if group.method is SamplingMethod.GENERATIVE:
                entry["text"] = list(response.text)
            else:
                entry["logprobs"] = [float(x) for x in response.logprobs]
    return {task: [by_index[i] for i in sorted(by_index)] for task, by_index in answers.items()}


# ------------------------------------------------------------------ the controller (main process)


def _spin(parent: int) -> None:
    """One busy process of `--background-load`: spins until stopped, or until its parent is gone."""
    while os.getppid() == parent:
        for _ in range(1_000_000):
            pass


class Comparison:
    """The lighteval process, the background load and the pairing of items, in the main process."""

    def __init__(self, checkpoint: Path, cache: Path, counts: dict[str, int], threads: int, ns: argparse.Namespace):
        import lighteval_side

        self.counts = counts
        self.threads = threads
        self.batch_size = ns.lighteval_batch_size
        self.max_new_tokens = ns.max_new_tokens
        self.hf_folder = lighteval_side.hf_copy(checkpoint, cache / f"{checkpoint.name}-hf")
        self.context = multiprocessing.get_context("spawn")
        self.load: list = []
        self.results: dict[str, dict] = {}  # item -> lighteval's record, for the current layout and load
        self.items = 0
        self._start_worker()

    def _start_worker(self) -> None:
        import lighteval_side

        self.connection, child = self.context.Pipe()
        self.worker = self.context.Process(
            target=lighteval_side.serve,
            args=(child, str(self.hf_folder), self.threads, self.batch_size, self.counts, self.max_new_tokens),
            daemon=True,
        )
        self.worker.start()
        status, detail = self.connection.recv()
        if status != "ready":
            raise RuntimeError(f"lighteval's process failed to start:\n{detail}")

    def version(self) -> str:
        from importlib.metadata import version

        return version("lighteval")

    def set_background_load(self, processes: int) -> None:
        """`processes` spinning processes from now on (the previous ones stopped)."""
        for proc in self.load:
            proc.kill()
            proc.join()
        self.load = [self.context.Process(target=_spin, args=(os.getpid(),), daemon=True) for _ in range(processes)]
        for proc in self.load:
            proc.start()

    def close(self) -> None:
        self.set_background_load(0)
        with contextlib.suppress(OSError, BrokenPipeError):
            self.connection.send(None)
        self.worker.join(timeout=30)
        if self.worker.is_alive():
            self.worker.kill()

    def task_names(self, item: str) -> list[str]:
        from bench_eval import task_family

        return list(self.counts) if item == "mix" else [t for t in self.counts if task_family(t) == item]

    def run_item(self, item: str) -> None:
        self.connection.send(self.task_names(item))
        status, detail = self.connection.recv()
        if status != "done":
            raise RuntimeError(f"lighteval's pipeline failed on {item}:\n{detail}")
        detail["load_average"] = os.getloadavg()[0]
        self.results[item] = detail

    def serve_gate(self, connections: list) -> bool:
        """Handle one message of the reporting rank (wait up to 0.5 s): run lighteval's item
        before or after the engine's (ABBA), then let every rank go. False when none came."""
        if not connections[0].poll(0.5):
            return False
        when, item = connections[0].recv()
        lighteval_first = self.items % 2 == 1
        if (when == "before") == lighteval_first:
            try:
                self.run_item(item)
            except BaseException as error:
                for connection in connections:
                    connection.send(f"{type(error).__name__}: {error}")
                raise
        if when == "after":
            self.items += 1
        for connection in connections:
            connection.send("go")
        return True


def background_loads(text: str) -> list[int]:
    return [int(value) for value in text.split(",") if value.strip()]


# ------------------------------------------------------------------ comparing and reporting


def compare_answers(ours: dict[str, list[dict]], theirs: dict[str, list[dict]]) -> dict:
    """Per doc of every task: the same doc and prompt, the same prediction (argmax choice of the
    log-probs; the generated text), log-probs within `LOGPROB_TOLERANCE`. Differences listed."""
    absolute, relative = LOGPROB_TOLERANCE
    differences: list[str] = []
    compared, max_abs, prompts_equal, generations = 0, 0.0, 0, 0
    for task in sorted(set(ours) | set(theirs)):
        a, b = ours.get(task, []), theirs.get(task, [])
        if len(a) != len(b):
            differences.append(f"{task}: {len(a)} docs here, {len(b)} in lighteval")
        for index, (mine, other) in enumerate(zip(a, b)):
            compared += 1
            where = f"{task} doc {index}"
            if (mine["query"], mine["choices"]) != (other["query"], other["choices"]):
                differences.append(f"{where}: another doc in lighteval ({other['query'][:60]!r})")
                continue
            prompts_equal += mine["prompt"] == other["prompt"]
            if mine["prompt"] != other["prompt"]:
                differences.append(f"{where}: prompts differ")
            if "text" in mine:
                generations += 1
                if mine["text"] != other["text"]:
                    differences.append(f"{where}: generated {mine['text']!r} here, {other['text']!r} in lighteval")
                continue
            x, y = mine["logprobs"], other["logprobs"]
            if len(x) != len(y):
                differences.append(f"{where}: {len(x)} log-probs here, {len(y)} in lighteval")
                continue
            if _argmax(x) != _argmax(y):
                differences.append(f"{where}: prediction {_argmax(x)} here, {_argmax(y)} in lighteval ({x} vs {y})")
            for u, v in zip(x, y):
                max_abs = max(max_abs, abs(u - v))
                if abs(u - v) > absolute + relative * abs(v):
                    differences.append(f"{where}: log-prob {u:.6f} here, {v:.6f} in lighteval")
    return {
        "docs_compared": compared,
        "prompts_equal": prompts_equal,
        "generations_compared": generations,
        "differences": differences,
        "max_abs_logprob_diff": max_abs,
    }


def _argmax(values: list[float]) -> int:
    return max(range(len(values)), key=values.__getitem__)


def item_rows(record: dict, lighteval: dict[str, dict]) -> list[dict]:
    """One row per paired item of a layout's `on` record: both sides' figures and the ratios."""
    from bench_eval import per_task_rows

    ours = {"mix": _mix_figures(record)}
    ours.update({row["task"]: row for row in per_task_rows(record) if not row["task"].startswith("all ")})
    rows = []
    for item, theirs in lighteval.items():
        mine = ours.get(item)
        if mine is None:
            continue
        seconds = mine["eval_s"] + mine.get("setup_s", 0.0)
        cpu = mine["cpu_s"] + mine.get("setup_cpu_s", 0.0)
        rows.append(
            {
                "item": "the mix" if item == "mix" else item,
                "kind": mine.get("kind", "mix"),
                "docs": mine["docs"],
                "lighteval_docs": theirs["docs"],
                "ours_s": seconds,
                "ours_cpu_s": cpu,
                "ours_mb": mine.get("peak_memory_mb", float("nan")),
                "theirs_s": theirs["eval_s"],
                "theirs_cpu_s": theirs["cpu_s"],
                "theirs_mb": theirs["peak_memory_mb"],
                "ours_docs_per_s": mine["docs"] / seconds,
                "theirs_docs_per_s": theirs["docs"] / theirs["eval_s"],
                "ours_positions": mine.get("processed_tokens", 0),
                "theirs_positions": theirs.get("positions", 0) if item != "mix" else 0,  # the mix holds generations
                "ours_cpu_share": cpu / seconds,
                "theirs_cpu_share": theirs["cpu_s"] / theirs["eval_s"],
                "ratio_wall": theirs["eval_s"] / seconds,
                "ratio_cpu": theirs["cpu_s"] / cpu,
                "load_average": theirs["load_average"],
            }
        )
    rows += _kind_rows(rows)
    for row in rows:
        row["positions_ratio"] = row["theirs_positions"] / row["ours_positions"] if row["theirs_positions"] else None
    return rows


def _mix_figures(record: dict) -> dict:
    return {
        "docs": record["docs"],
        "eval_s": record["eval_s"],
        "setup_s": record["setup_s"],
        "cpu_s": record["cpu_s"],
        "setup_cpu_s": record.get("setup_cpu_s", 0.0),
        "peak_memory_mb": record.get("eval_peak_memory_mb", record["peak_memory_mb_per_rank"]),
    }


SUMMED = ("ours_s", "ours_cpu_s", "theirs_s", "theirs_cpu_s", "ours_positions", "theirs_positions")


def _kind_rows(rows: list[dict]) -> list[dict]:
    """`all <kind>` rows: seconds summed over the kind's items, memory the largest."""
    kinds: dict[str, list[dict]] = {}
    for row in rows:
        if row["item"] != "the mix":
            kinds.setdefault(row["kind"], []).append(row)
    out = []
    for kind, members in kinds.items():
        total = {
            key: sum(r[key] for r in members)
            for key in ("docs", *SUMMED)
        }
        out.append(
            {
                "item": f"all {kind}",
                "kind": kind,
                "docs": total["docs"],
                "lighteval_docs": sum(r["lighteval_docs"] for r in members),
                **{key: total[key] for key in SUMMED},
                "ours_mb": max(r["ours_mb"] for r in members),
                "theirs_mb": max(r["theirs_mb"] for r in members),
                "ours_docs_per_s": total["docs"] / total["ours_s"],
                "theirs_docs_per_s": total["docs"] / total["theirs_s"],
                "ours_cpu_share": total["ours_cpu_s"] / total["ours_s"],
                "theirs_cpu_share": total["theirs_cpu_s"] / total["theirs_s"],
                "ratio_wall": total["theirs_s"] / total["ours_s"],
                "ratio_cpu": total["theirs_cpu_s"] / total["ours_cpu_s"],
                "load_average": max(r["load_average"] for r in members),
            }
        )
    return out


ROW_COLUMNS = (
    ("item", "{:<30}", "item"),
    ("docs", "{:>5}", "docs"),
    ("ours_s", "{:>8.2f}", "ours s"),
    ("ours_cpu_s", "{:>8.2f}", "ours CPU"),
    ("theirs_s", "{:>8.2f}", "LE s"),
    ("theirs_cpu_s", "{:>8.2f}", "LE CPU"),
    ("ours_docs_per_s", "{:>7.2f}", "docs/s"),
    ("theirs_docs_per_s", "{:>7.2f}", "LE d/s"),
    ("ours_cpu_share", "{:>5.2f}", "CPU/s"),
    ("theirs_cpu_share", "{:>5.2f}", "LE CPU/s"),
    ("ours_mb", "{:>7.0f}", "MB"),
    ("theirs_mb", "{:>7.0f}", "LE MB"),
    ("positions_ratio", "{:>5.2f}x", "LE pos/ours"),
    ("ratio_wall", "{:>6.2f}x", "wall"),
    ("ratio_cpu", "{:>6.2f}x", "CPU"),
    ("load_average", "{:>5.1f}", "load"),
)


def _cell(fmt: str, value: Any) -> str:
    return "-" if value is None else fmt.format(value)


def format_rows(title: str, rows: list[dict], agreement: dict | None) -> str:
    widths = [max([len(header)] + [len(_cell(fmt, r[key])) for r in rows]) for key, fmt, header in ROW_COLUMNS]
    lines = [title, " ".join(h.rjust(w) for (_, _, h), w in zip(ROW_COLUMNS, widths))]
    for row in rows:
        lines.append(" ".join(_cell(fmt, row[key]).rjust(w) for (key, fmt, _), w in zip(ROW_COLUMNS, widths)))
    if agreement is not None:
        lines.append(
            f"per-doc answers of the mix: {agreement['docs_compared']} docs compared, "
            f"{agreement['prompts_equal']} prompts equal, {len(agreement['differences'])} differences, "
            f"largest |log-prob difference| {agreement['max_abs_logprob_diff']:.2e}"
        )
        lines += [f"  difference: {line}" for line in agreement["differences"][:50]]
        if len(agreement["differences"]) > 50:
            lines.append(f"  ... {len(agreement['differences']) - 50} more (in the JSON)")
    return "\n".join(lines)


def load_lines(records: list[dict]) -> list[str]:
    """Per layout, the mix's ratios under each background load against the quiet ones."""
    quiet = {r["layout"]: r for r in records if r.get("lighteval") and r["background_load"] == 0}
    lines = []
    for record in records:
        base = quiet.get(record["layout"])
        if not record.get("lighteval") or record["background_load"] == 0 or base is None:
            continue
        loaded, calm = (next(row for row in r["lighteval"]["rows"] if row["item"] == "the mix") for r in (record, base))
        lines.append(
            f"{record['layout']}: the mix with {record['background_load']} busy process(es): "
            f"{loaded['ratio_wall']:.2f}x wall, {loaded['ratio_cpu']:.2f}x CPU; quiet {calm['ratio_wall']:.2f}x wall, "
            f"{calm['ratio_cpu']:.2f}x CPU (loaded / quiet: {loaded['ratio_wall'] / calm['ratio_wall']:.2f} wall, "
            f"{loaded['ratio_cpu'] / calm['ratio_cpu']:.2f} CPU)"
        )
    return lines
