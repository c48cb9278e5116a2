"""Where task datasets come from: local data dirs first, then the Hugging Face Hub.

A data dir is a root folder holding `<hf_repo>/<hf_subset>/` with one file per split
(`<split>.jsonl`, `<split>.jsonl.gz`, `<split>.parquet`) or one `save_to_disk` folder per split.
Entries, in priority order, come from `set_data_dirs([...])` or else from the colon-separated
environment variable `LIGHTEVAL_NANOTRON_DATA_DIRS`:

- a path: a root as above;
- `HF_REPO=PATH`: the folder for that one Hub repository (holding `<hf_subset>/` folders, or
  anything `datasets.load_dataset(PATH, hf_subset)` reads);
- `bundled`: the benchmark slices shipped in `lighteval_nanotron/bundled_data/slices/`.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "LIGHTEVAL_NANOTRON_DATA_DIRS"
BUNDLED = "bundled"
BUNDLED_ROOT = Path(__file__).resolve().parent.parent / "bundled_data" / "slices"
SPLIT_FILE_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")

_data_dirs: list[str] | None = None


def set_data_dirs(dirs: list[str | os.PathLike] | None) -> None:
    """Set the ordered data dirs for this process (None goes back to the environment variable)."""
    global _data_dirs
    _data_dirs = None if dirs is None else [str(d) for d in dirs if str(d)]


def get_data_dirs() -> list[str]:
    """The data dirs in effect: those set by `set_data_dirs`, else `$LIGHTEVAL_NANOTRON_DATA_DIRS`."""
    if _data_dirs is not None:
        return list(_data_dirs)
    return [entry for entry in os.environ.get(ENV_VAR, "").split(":") if entry.strip()]


@dataclass(frozen=True)
class DatasetSource:
    """What to load for a task; plain strings so that it pickles into worker processes."""

    task_name: str
    hf_repo: str
    hf_subset: str | None
    hf_revision: str | None
    data_dirs: tuple[str, ...]


def _subset_dir_name(hf_subset: str | None) -> str:
    return hf_subset or "default"


def _split_entries(folder: Path) -> dict[str, Path]:
    """Split name -> data file or `save_to_disk` folder, for a subset folder (sorted by name)."""
    found: dict[str, Path] = {}
    for child in sorted(folder.iterdir()):
        if child.is_dir() and (child / "state.json").exists():
            found.setdefault(child.name, child)
            continue
        for suffix in SPLIT_FILE_SUFFIXES:
            if child.is_file() and child.name.endswith(suffix):
                found.setdefault(child.name[: -len(suffix)], child)
    return found


def is_subset_dir(folder: Path) -> bool:
    return folder.is_dir() and bool(_split_entries(folder))


def _root_path(entry: str) -> Path:
    return BUNDLED_ROOT if entry == BUNDLED else Path(entry).expanduser()


def candidate_locations(hf_repo: str, hf_subset: str | None, data_dirs: tuple[str, ...]) -> list[Path]:
    """Every local folder that could hold this dataset, in priority order (existing or not)."""
    subset = _subset_dir_name(hf_subset)
    locations: list[Path] = []
    for entry in data_dirs:
        repo, sep, path = entry.partition("=")
        if sep:
            if repo.strip() == hf_repo:
                locations.append(Path(path.strip()).expanduser())
            continue
        locations.append(_root_path(entry) / hf_repo / subset)
    return locations


def describe_data_dirs(data_dirs: tuple[str, ...]) -> str:
    if not data_dirs:
        return f"no data dirs set (${ENV_VAR} is empty)"
    return "data dirs " + ", ".join(repr(d) for d in data_dirs)


def _read_jsonl(path: Path):
    from datasets import Dataset

    opener = gzip.open if path.name.endswith(".gz") else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rows.append(json.loads(line))
    columns: dict[str, list] = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, [])
    return Dataset.from_dict({key: [row.get(key) for row in rows] for key in columns})


def _read_split(path: Path):
    import pyarrow.parquet as pq
    from datasets import Dataset, load_from_disk
    from datasets.table import InMemoryTable

    if path.is_dir():
        return load_from_disk(str(path))
    if path.name.endswith(".parquet"):
        return Dataset(InMemoryTable(pq.read_table(path)))
    return _read_jsonl(path)


def load_subset_dir(folder: Path):
    """A `DatasetDict` with one split per data file / `save_to_disk` folder of `folder`."""
    from datasets import DatasetDict

    return DatasetDict({split: _read_split(path) for split, path in _split_entries(folder).items()})


def load_source(source: DatasetSource):
    """Load all splits of a task's dataset (unfiltered). Raises `DatasetLoadError` with the fix."""
    tried: list[str] = []
    subset = _subset_dir_name(source.hf_subset)
    for location in candidate_locations(source.hf_repo, source.hf_subset, source.data_dirs):
        if is_subset_dir(location):
            return load_subset_dir(location)
        if is_subset_dir(location / subset):
            return load_subset_dir(location / subset)
        if location.is_dir() and location.name != subset:  # a `HF_REPO=PATH` mapping to a repo copy
            return _load_with_datasets(source, str(location), tried)
        tried.append(f"{location} (no split files)" if location.is_dir() else f"{location} (not found)")

    repo_path = Path(source.hf_repo).expanduser()
    if repo_path.is_dir() and is_subset_dir(repo_path / subset):
        return load_subset_dir(repo_path / subset)
    return _load_with_datasets(source, source.hf_repo, tried)


def _load_with_datasets(source: DatasetSource, path: str, tried: list[str]):
    from datasets import load_dataset

    from lighteval_nanotron.errors import DatasetLoadError

    try:
        return load_dataset(path=path, name=source.hf_subset, revision=source.hf_revision)
    except Exception as error:  # every failure becomes one actionable error
        tried.append(f"datasets.load_dataset({path!r}, {source.hf_subset!r}, revision={source.hf_revision!r})")
        raise DatasetLoadError(
            f"Task {source.task_name!r}: cannot load dataset {source.hf_repo!r} subset {source.hf_subset!r} "
            f"({type(error).__name__}: {error}). Tried, with {describe_data_dirs(source.data_dirs)}: "
            + "; ".join(tried)
            + f". Fix: set {ENV_VAR}=bundled (benchmark slices shipped with the package), or point it "
            f"(or --data-dir) at a folder holding {source.hf_repo}/{_subset_dir_name(source.hf_subset)}/"
            "<split>.jsonl, or allow Hub access (unset HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)."
        ) from error
