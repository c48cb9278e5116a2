"""Text documents of a held-out domain: local jsonl/parquet files (a file or a folder of them) or
a Hugging Face dataset by name, read with `datasets` (memory-mapped Arrow, so a large source
costs no memory until its rows are read)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lighteval_nanotron.errors import ConfigError, DatasetLoadError
from lighteval_nanotron.heldout.spec import HeldOutSpec

_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
_LOCAL_HINTS = ("/", "./", "../", "~")


def _builder(path: Path) -> str | None:
    suffixes = [s for s in path.suffixes if s != ".gz"]
    return _BUILDERS.get(suffixes[-1]) if suffixes else None


def _local_files(spec: HeldOutSpec, path: Path) -> tuple[str, list[str]]:
    where = f"held-out domain {spec.name!r}"
    if path.is_file():
        builder = _builder(path)
        if builder is None:
            raise ConfigError(f"{where}: {path} is not a .jsonl, .json or .parquet file (optionally .gz).")
        return builder, [str(path)]
    files = sorted(p for p in path.iterdir() if p.is_file() and _builder(p))
    if not files:
        raise ConfigError(f"{where}: folder {path} has no .jsonl, .json, .parquet or *.ds files.")
    builders = {_builder(p) for p in files}
    if len(builders) > 1:
        raise ConfigError(f"{where}: folder {path} mixes jsonl and parquet files: keep one kind per domain.")
    return builders.pop(), [str(p) for p in files]


def is_local(spec: HeldOutSpec) -> bool:
    """A path on disk (or meant to be one), as opposed to a Hugging Face dataset name."""
    path = Path(spec.path).expanduser()
    return path.exists() or spec.path.startswith(_LOCAL_HINTS) or _builder(path) is not None


def load_text_dataset(spec: HeldOutSpec) -> Any:
    """The domain's rows as a `datasets.Dataset`, with a string `text_column`; raises on a missing,
    unreadable or empty source, or a missing column, naming the domain and the fix."""
    import datasets

    where = f"held-out domain {spec.name!r}"
    path = Path(spec.path).expanduser()
    try:
        if is_local(spec):
            if not path.exists():
                raise ConfigError(f"{where}: {path} does not exist: give an existing file or folder.")
            builder, files = _local_files(spec, path)
            if all(Path(file).stat().st_size == 0 for file in files):
                raise ConfigError(f"{where}: {path} is empty: give a file with at least one row of text.")
            dataset = datasets.load_dataset(builder, data_files=files, split="train")
        else:
            dataset = datasets.load_dataset(spec.path, spec.subset, split=spec.split)
    except ConfigError:
        raise
    except Exception as error:  # noqa: BLE001 - datasets raises many kinds; one message names the source
        raise DatasetLoadError(
            f"{where}: cannot read {spec.path!r} ({type(error).__name__}: {error}). Give a readable jsonl/parquet "
            "file or folder, a Nanoset folder, or a dataset name that `datasets.load_dataset` finds offline."
        ) from error
    if spec.text_column not in dataset.column_names:
        raise ConfigError(
            f"{where}: {spec.path} has no column {spec.text_column!r} (columns: {dataset.column_names}); "
            "set text_column."
        )
    if len(dataset) == 0:
        raise ConfigError(f"{where}: {spec.path} has no rows.")
    return dataset.select_columns([spec.text_column])


def texts_in_order(dataset: Any, column: str, order: Any, spec: HeldOutSpec):
    """The texts of rows `order` (an index array), each checked to be a string."""
    for index in order:
        text = dataset[int(index)][column]
        if not isinstance(text, str):
            raise ConfigError(
                f"held-out domain {spec.name!r}: row {int(index)} of {spec.path} has a {type(text).__name__} "
                f"in column {column!r}, not text."
            )
        yield text
