"""Where task datasets come from: local data dirs first, then the Hugging Face Hub.

A data dir is a root folder holding `<hf_repo>/<hf_subset>/` with one file per split
(`<split>.jsonl`, `<split>.jsonl.gz`, `<split>.parquet`) or one `save_to_disk` folder per split.
Entries, in priority order, come from `set_data_dirs([...])` or else from the colon-separated
environment variable `LIGHTEVAL_NANOTRON_DATA_DIRS`:

- a path: a root as above;
- `HF_REPO=PATH`: the folder for that one Hub repository (holding `<hf_subset>/` folders, or
  anything `datasets.load_dataset(PATH, hf_subset)` reads). A Hub-style copy, as
  `huggingface-cli download --repo-type dataset` leaves it (a README whose YAML front matter has
  `configs:`, and `data/<split>-00000-of-00001.parquet` files), is read by `datasets` itself, with
  the configs and split names that README declares;
- `bundled`: the benchmark slices shipped in `lighteval_nanotron/bundled_data/slices/`.

Split files sharded as the Hub names them (`<split>-00000-of-00002.parquet`, ...) are one split.
Every entry must be an existing folder (a path or mapping that does not exist fails at once,
naming it: the user said where the data is, and a typo must not make a dataset come from elsewhere).
A dataset found in no data dir is loaded from the Hub by name; when the Hub cannot be reached (and
`HF_HUB_OFFLINE` / `HF_DATASETS_OFFLINE` do not ask for the Hugging Face cache) that fails at
once with what was tried, instead of retrying for half a minute. Offline (or when the Hub fails),
`datasets` reads the latest `datasets` cache entry of that name: one built from the Hub's dataset
is used (its commit and path recorded); one built from a local folder of the same name is not the
Hub's dataset and is never used. With no data dir set at all, a dataset the Hub cannot give comes
from the shipped slice when there is one, with a warning. Every load says where the data came from
(`data_origin.DataOrigin`, recorded with the results).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lighteval_nanotron.errors import DatasetLoadError
from lighteval_nanotron.tasks.data_origin import COMMIT, DataOrigin, LoadedDataset, cache_entry, entry_commit
from lighteval_nanotron.tasks.hub_access import DATASETS_OFFLINE_VARS, hub_unreachable, offline_mode

logger = logging.getLogger(__name__)

ENV_VAR = "LIGHTEVAL_NANOTRON_DATA_DIRS"
DATA_DIR_SETTINGS = f"--data-dir, the lighteval_nanotron section's data_dirs, set_data_dirs([...]) or ${ENV_VAR}"
"""Where data dirs are set, each way in (eval, the hook, Python, the environment), for messages."""
BUNDLED = "bundled"
BUNDLED_ROOT = Path(__file__).resolve().parent.parent / "bundled_data" / "slices"
SPLIT_FILE_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")
"""`<split>-00000-of-00001`: the shard numbering of files the Hub's parquet conversion writes."""

_data_dirs: list[str] | None = None


def set_data_dirs(dirs: list[str | os.PathLike] | None) -> None:
    """Set the ordered data dirs for this process (None goes back to the environment variable)."""
    global _data_dirs
    _data_dirs = None if dirs is None else [str(d) for d in dirs if str(d)]


@contextmanager
def data_dirs_kept() -> Iterator[None]:
    """This process's data dirs as they were after the block, whatever it set (a check that loads
    tasks before any rank starts must not choose the data dirs of the rest of the process)."""
    global _data_dirs
    kept = _data_dirs
    try:
        yield
    finally:
        _data_dirs = kept


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
    data_files: str | list | dict | None = None
    """The task's `hf_data_files`: loaded as given (`datasets.load_dataset(..., data_files=...)`)."""


def _subset_dir_name(hf_subset: str | None) -> str:
    return hf_subset or "default"


def _split_entries(folder: Path) -> dict[str, list[Path]]:
    """Split name -> its data files (shards in order) or `save_to_disk` folder, for a subset folder."""
    found: dict[str, list[Path]] = {}
    for child in sorted(folder.iterdir()):
        if child.is_dir() and (child / "state.json").exists():
            found.setdefault(child.name, [child])
            continue
        for suffix in SPLIT_FILE_SUFFIXES:
            if child.is_file() and child.name.endswith(suffix):
                split = SHARD_SUFFIX.sub("", child.name[: -len(suffix)])
                if split not in found:
                    found[split] = [child]
                elif found[split][0].name.endswith(suffix) and SHARD_SUFFIX.search(child.name[: -len(suffix)]):
                    found[split].append(child)
                break
    return found


def is_hub_folder(folder: Path) -> bool:
    """A Hub-style dataset copy: a README.md whose YAML front matter declares `configs:`."""
    readme = folder / "README.md"
    if not readme.is_file():
        return False
    text = readme.read_text(encoding="utf-8-sig", errors="replace")
    if not text.startswith("---"):
        return False
    front_matter = text.split("---", 2)[1] if text.count("---") >= 2 else ""
    return re.search(r"^configs\s*:", front_matter, flags=re.MULTILINE) is not None


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
    kinds: dict[str, dict[str, int]] = {}  # field -> {kind of value: first line}
    with opener(path, "rt", encoding="utf-8-sig") as handle:  # a byte-order mark is not part of the first row
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError as error:
                    message = f"{path}, line {number}: not a JSON row ({error}): fix or remove the line."
                    raise DatasetLoadError(message) from None
                if not isinstance(row, dict):
                    shown = line.strip()[:60]
                    raise DatasetLoadError(f"{path}, line {number}: {shown!r} is not a JSON object of fields.")
                _record_kinds(row, "", number, kinds)
                rows.append(row)
    for field, seen in kinds.items():
        if len(seen) > 1:
            (kind, line), (other, other_line) = sorted(seen.items(), key=lambda item: item[1])[:2]
            raise DatasetLoadError(
                f"{path}: field {field!r} is {kind} on line {line} and {other} on line {other_line}: give it one type "
                "in every row."
            )
    columns: dict[str, list] = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, [])
    return Dataset.from_dict({key: [row.get(key) for row in rows] for key in columns})


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _record_kinds(value: Any, field: str, line: int, kinds: dict[str, dict[str, int]]) -> None:
    """Note the kind of every non-null value of a row, by field path (`choices.text`, `endings[]`)."""
    if value is None:
        return
    if field:
        kinds.setdefault(field, {}).setdefault(_kind(value), line)
    if isinstance(value, dict):
        for key, item in value.items():
            _record_kinds(item, f"{field}.{key}" if field else str(key), line, kinds)
    elif isinstance(value, list):
        for item in value:
            _record_kinds(item, f"{field}[]", line, kinds)


def _read_split(paths: list[Path]):
    import pyarrow.parquet as pq
    from datasets import Dataset, concatenate_datasets, load_from_disk
    from datasets.table import InMemoryTable

    parts = []
    for path in paths:
        if path.is_dir():
            parts.append(load_from_disk(str(path)))
        elif path.name.endswith(".parquet"):
            parts.append(Dataset(InMemoryTable(pq.read_table(path))))
        else:
            parts.append(_read_jsonl(path))
    return parts[0] if len(parts) == 1 else concatenate_datasets(parts)


def load_subset_dir(folder: Path):
    """A `DatasetDict` with one split per data file / `save_to_disk` folder of `folder`."""
    from datasets import DatasetDict

    return DatasetDict({split: _read_split(paths) for split, paths in _split_entries(folder).items()})


def check_data_dirs(source: DatasetSource) -> None:
    """Raise DatasetLoadError naming the first data dir (or `HF_REPO=PATH` folder) that is not an
    existing folder: the user said where the data is, so a dataset must not be looked up elsewhere
    by name (the Hub, or a Hugging Face cache that may hold an unrelated copy) because of a typo."""
    for entry in source.data_dirs:
        repo, sep, path = entry.partition("=")
        if sep and not (repo.strip() and path.strip()):  # `ai2_arc=` would read the working directory as the dataset
            raise DatasetLoadError(
                f"Task {source.task_name!r}: the data dir entry {entry!r} is not HF_REPO=PATH (both parts are needed): "
                "fix it, e.g. allenai/ai2_arc=/data/arc, or give a ROOT folder."
            )
        folder = Path(path.strip()).expanduser() if sep else _root_path(entry)
        if folder.is_dir():
            continue
        problem = "does not exist" if not folder.exists() else "is not a folder"
        where = (
            f"the data dir entry {repo.strip()}={folder} points at a folder that {problem}"
            if sep
            else (f"the data dir {entry!r} ({folder}) {problem}")
        )
        raise DatasetLoadError(
            f"Task {source.task_name!r}: {where}: fix that path or remove the entry ({DATA_DIR_SETTINGS}, a "
            "colon-separated list). A dataset is not looked up by name on the Hub or in its cache instead."
        )


def load_source(source: DatasetSource) -> LoadedDataset:
    """Load all splits of a task's dataset (unfiltered), with where it came from. Raises
    `DatasetLoadError` with the fix (a data dir that does not exist included: `check_data_dirs`).

    With no data dir set, a dataset the Hub cannot give (unreachable, or offline and not cached)
    comes from the slice shipped with the package when there is one, with a warning that says so."""
    check_data_dirs(source)
    tried: list[str] = []
    if source.data_files is not None:  # the task names its files (lighteval's hf_data_files)
        dataset = _load_with_datasets(source, source.hf_repo, tried)
        return LoadedDataset(dataset, DataOrigin("data_files", f"{source.hf_repo} {source.data_files}"))
    subset = _subset_dir_name(source.hf_subset)
    for location in candidate_locations(source.hf_repo, source.hf_subset, source.data_dirs):
        origin = _local_origin(location)
        if is_hub_folder(location):
            return LoadedDataset(_load_with_datasets(source, str(location), tried), origin)
        if is_subset_dir(location):
            return LoadedDataset(load_subset_dir(location), origin)
        if is_subset_dir(location / subset):
            return LoadedDataset(load_subset_dir(location / subset), _local_origin(location / subset))
        if location.is_dir() and location.name != subset:  # a `HF_REPO=PATH` mapping to a repo copy
            return LoadedDataset(_load_with_datasets(source, str(location), tried), origin)
        tried.append(f"{location} (no split files)" if location.is_dir() else f"{location} (not found)")

    repo_path = Path(source.hf_repo).expanduser()
    if repo_path.is_dir():
        origin = DataOrigin("local_folder", str(repo_path))
        if is_hub_folder(repo_path):
            return LoadedDataset(_load_with_datasets(source, str(repo_path), tried), origin)
        if is_subset_dir(repo_path / subset):
            return LoadedDataset(load_subset_dir(repo_path / subset), origin)
    else:
        unreachable = _hub_unreachable()
        if unreachable:
            tried.append(f"the Hub ({unreachable})")
            shipped = _shipped_slice(source, f"the Hub cannot be reached ({unreachable})")
            if shipped is not None:
                return shipped
            raise _load_error(source, "it is in no data dir and the Hub cannot be reached", tried)
    offline = offline_mode(DATASETS_OFFLINE_VARS)
    try:
        dataset = _load_with_datasets(source, source.hf_repo, tried)
    except DatasetLoadError:
        why = f"{offline} is set and the Hugging Face cache does not hold it"
        shipped = _shipped_slice(source, why) if offline else None
        if shipped is None:
            raise
        return shipped
    entry = cache_entry(dataset)
    refused = _not_the_hub_dataset(source, entry)
    if refused:
        shipped = _shipped_slice(source, refused)
        if shipped is not None:
            return shipped
        tried.append(f"the datasets cache entry {entry} (not used)")
        raise _load_error(source, refused, tried)
    kind = "hub_cache" if offline else "hub"
    commit = entry_commit(entry) if entry is not None else None
    revision = source.hf_revision or "main"
    origin = DataOrigin(kind, source.hf_repo, revision, commit, cache_entry=str(entry) if entry else None)
    return LoadedDataset(dataset, origin)


def _not_the_hub_dataset(source: DatasetSource, entry: Path | None) -> str | None:
    """Why the `datasets` cache entry that `datasets.load_dataset(hf_repo)` read is not the Hub's
    dataset asked for, else None. Offline, `datasets` takes the latest entry of that name, whatever
    built it: a local folder named like the benchmark (`load_dataset("/data/ai2_arc", ...)` once)
    leaves such an entry, and the revision asked is not checked."""
    if entry is None:
        return None
    commit = entry_commit(entry)
    if commit is None:
        return (
            f"the datasets cache entry that `datasets` read for it, {entry}, was built from a local folder of "
            f"that name, not from the Hub's dataset: it is not used (to evaluate that folder, name it in the data "
            f"dirs: {source.hf_repo}=FOLDER)"
        )
    asked = source.hf_revision
    if asked and COMMIT.match(asked) and commit != asked:
        return f"the datasets cache entry that `datasets` read for it, {entry}, holds commit {commit}, not {asked}"
    return None


def _local_origin(location: Path) -> DataOrigin:
    shipped = location.resolve().is_relative_to(BUNDLED_ROOT)
    return DataOrigin("bundled_slice" if shipped else "data_dir", str(location))


def _shipped_slice(source: DatasetSource, why: str) -> LoadedDataset | None:
    """The slice shipped with the package, when no data dir is set and it holds this dataset."""
    if source.data_dirs:
        return None  # the user said where the data is
    location = candidate_locations(source.hf_repo, source.hf_subset, (BUNDLED,))[0]
    if not is_subset_dir(location):
        return None
    dataset = load_subset_dir(location)
    rows = ", ".join(f"{len(rows)} rows of {split}" for split, rows in dataset.items())
    note = (
        f"no data dir is set and {why}: the slice shipped with the package is used ({rows}), not the full "
        f"dataset. Set the data dirs ({DATA_DIR_SETTINGS}) to `bundled` to choose it, or to a folder with the "
        "full data"
    )
    logger.warning("Task %s: %s.", source.task_name, note)
    return LoadedDataset(dataset, DataOrigin("bundled_slice", str(location), note=note))


def _hub_unreachable() -> str | None:
    """Why the Hub cannot be reached (one connection attempt, a few seconds at most), else None.

    Offline mode (`HF_HUB_OFFLINE` / `HF_DATASETS_OFFLINE`) means "use the Hugging Face cache":
    nothing is probed then."""
    return None if offline_mode(DATASETS_OFFLINE_VARS) else hub_unreachable()


def _load_error(source: DatasetSource, reason: str, tried: list[str]):
    shipped = is_subset_dir(candidate_locations(source.hf_repo, source.hf_subset, (BUNDLED,))[0])
    fix = (
        (f"set {ENV_VAR}=bundled (a slice of it ships with the package), or " if shipped else "")
        + f"point the data dirs ({DATA_DIR_SETTINGS}) at a folder holding "
        f"{source.hf_repo}/{_subset_dir_name(source.hf_subset)}/<split>.jsonl, or "
        f"{source.hf_repo}=PATH at a copy of its Hub repository, or allow Hub access "
        "(a network, or HF_DATASETS_OFFLINE=1 to read the Hugging Face cache)"
    )
    return DatasetLoadError(
        f"Task {source.task_name!r}: cannot load dataset {source.hf_repo!r} subset {source.hf_subset!r}: {reason}. "
        f"Tried, with {describe_data_dirs(source.data_dirs)}: " + ("; ".join(tried) or "nothing") + f". Fix: {fix}."
    )


def _load_with_datasets(source: DatasetSource, path: str, tried: list[str]):
    from datasets import load_dataset

    files = {} if source.data_files is None else {"data_files": source.data_files}
    try:
        return load_dataset(path=path, name=source.hf_subset, revision=source.hf_revision, **files)
    except Exception as error:  # every failure becomes one actionable error
        given = "".join(f", {key}={value!r}" for key, value in files.items())
        tried.append(f"datasets.load_dataset({path!r}, {source.hf_subset!r}, revision={source.hf_revision!r}{given})")
        raise _load_error(source, f"{type(error).__name__}: {error}", tried) from error
