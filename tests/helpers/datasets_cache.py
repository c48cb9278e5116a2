"""`datasets` cache entries named like a benchmark, as users' machines hold them.

`local_folder_entry`: what users who prepare benchmarks for offline runs leave in their cache, a
local folder named `ai2_arc` (config `ARC-Easy`) loaded once with
`datasets.load_dataset(folder, "ARC-Easy")`. Offline, `datasets.load_dataset("ai2_arc", ...)`
falls back to "the latest cached version" of `ai2_arc` by name: that entry.
`hub_commit_entry`: the same entry under the name `datasets` gives an entry built from the Hub
(`<name>/<config>/<version>/<commit>/`, the repository's 40-digit commit; a local folder's entry
is named after a 16-digit hash of its files)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

README = """---
configs:
- config_name: ARC-Easy
  data_files:
{files}
---
"""


def arc_row(index: int) -> dict:
    return {
        "id": f"local-{index}",
        "question": f"Local question {index}?",
        "choices": {"text": ["one", "two", "three", "four"], "label": ["A", "B", "C", "D"]},
        "answerKey": "A",
    }


def local_folder_entry(cache_dir: Path, folder_parent: Path, splits: dict[str, int] | None = None) -> Path:
    """Build `<folder_parent>/ai2_arc` (200 rows of `validation` unless `splits` says otherwise), load it
    once with `datasets.load_dataset(folder, "ARC-Easy", cache_dir=cache_dir)`; return the entry's folder."""
    from datasets import load_dataset

    splits = splits or {"validation": 200}
    folder = folder_parent / "ai2_arc"
    (folder / "ARC-Easy").mkdir(parents=True)
    files = "".join(f"  - split: {split}\n    path: ARC-Easy/{split}.jsonl\n" for split in splits)
    (folder / "README.md").write_text(README.format(files=files.rstrip("\n")))
    for split, count in splits.items():
        lines = [json.dumps(arc_row(index)) for index in range(count)]
        (folder / "ARC-Easy" / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    dataset = load_dataset(str(folder), "ARC-Easy", cache_dir=str(cache_dir))
    (entry,) = {Path(split.cache_files[0]["filename"]).parent for split in dataset.values()}
    return entry


def hub_commit_entry(entry: Path, commit: str) -> Path:
    """Rename `entry` to the name of an entry built from the Hub at `commit`; return its new folder."""
    hub_entry = entry.with_name(commit)
    shutil.move(str(entry), str(hub_entry))
    return hub_entry
