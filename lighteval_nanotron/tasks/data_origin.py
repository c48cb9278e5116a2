"""Where a task's dataset was read from (`DataOrigin`), recorded with its results: a data dir, the
slice shipped with the package, a local dataset folder, the Hugging Face Hub (at which revision)
or its cache, with the `datasets` cache entry the rows were read from. A shipped slice holds a few
hundred rows of a benchmark's split, so its numbers are not the full benchmark's; the record says
so next to lighteval's `original_num_docs`."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

KINDS = {
    "data_dir": "a data dir",
    "bundled_slice": "the slice shipped with the package",
    "local_folder": "a local dataset folder",
    "data_files": "the data files the task names (hf_data_files)",
    "hub": "the Hugging Face Hub",
    "hub_cache": "the Hugging Face cache (offline)",
}
"""Each kind of origin, as the console notes name it."""
COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class DataOrigin:
    """Where a dataset came from; plain strings, so that it pickles across processes and ranks."""

    kind: str
    """One of `KINDS`."""
    location: str
    """The folder read, or the Hub repository."""
    revision: str | None = None
    """Hub datasets: the revision asked for (`hf_revision`, else `main`)."""
    resolved_revision: str | None = None
    """Hub datasets: the commit the cached files were made from, when their path records it."""
    note: str | None = None
    """Why this origin was taken when the user did not name it (e.g. the slice used offline)."""
    cache_entry: str | None = None
    """Hub datasets: the `datasets` cache entry the rows were read from (`<cache>/<name>/<config>/<version>/<hash>`)."""

    @property
    def is_slice(self) -> bool:
        return self.kind == "bundled_slice"

    def describe(self) -> str:
        """Where the rows were read from, for messages about them."""
        where = f"{KINDS.get(self.kind, self.kind)}: {self.location}"
        where += f" at commit {self.resolved_revision}" if self.resolved_revision else ""
        return where + (f", datasets cache entry {self.cache_entry}" if self.cache_entry else "")

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


class LoadedDataset(NamedTuple):
    """A task's dataset (every split, unfiltered) and where it came from."""

    dataset: Any
    origin: DataOrigin


def cache_entry(dataset: Any) -> Path | None:
    """The `datasets` cache entry (`<cache>/<name>/<config>/<version>/<hash>/`) whose files hold a
    dataset's rows, else None (rows in memory)."""
    for split in getattr(dataset, "values", lambda: [])():
        for cache_file in getattr(split, "cache_files", None) or []:
            return Path(cache_file["filename"]).parent
    return None


def entry_commit(entry: Path) -> str | None:
    """The Hub commit a cache entry was built from: `datasets` names the entry of a Hub dataset
    after the repository's commit (40 hex digits); the entry of a local folder of the same name
    gets a 16-digit hash of its files, hence None."""
    return entry.name if COMMIT.match(entry.name) else None
