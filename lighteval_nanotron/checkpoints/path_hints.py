"""What a path given as a Nanotron checkpoint is instead, and the command that makes it one: the fix
that ends the "not a checkpoint" error (a GGUF file: `convert gguf`; a Hugging Face model folder:
`convert hf`; a training's checkpoints folder: one step of it, or `--checkpoints-dir`)."""

from __future__ import annotations

from pathlib import Path

from lighteval_nanotron.steps import numbered_folders

HF_WEIGHT_SUFFIXES = (".safetensors", ".bin")


def _is_hf_model_folder(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        child.suffix in HF_WEIGHT_SUFFIXES for child in path.iterdir() if child.is_file()
    )


def _step_folders(path: Path) -> list[Path]:
    return [folder for _, folder in numbered_folders(path)]


def checkpoint_path_hint(path: Path) -> str | None:
    """A sentence naming what `path` is and the command to use, when it is something known that is
    not a Nanotron checkpoint folder (None otherwise)."""
    if path.is_file():
        if path.suffix == ".gguf":
            return (
                f"{path} is a GGUF file, not a Nanotron checkpoint: convert it first, "
                f"`lighteval-nanotron convert gguf {path} checkpoints/{path.stem}`, then evaluate "
                f"checkpoints/{path.stem}."
            )
        folder = path.parent
        return f"{path} is a file: pass the checkpoint folder (e.g. {folder}), not a file in it."
    if not path.is_dir():
        return None
    if _is_hf_model_folder(path):
        return (
            f"{path} is a Hugging Face model folder (config.json and weights), not a Nanotron checkpoint: convert "
            f"it first, `lighteval-nanotron convert hf {path} checkpoints/{path.name}`, then evaluate "
            f"checkpoints/{path.name}."
        )
    steps = _step_folders(path)
    if steps:
        return (
            f"{path} holds the step folders of a training run ({', '.join(p.name for p in steps[:5])}"
            f"{', ...' if len(steps) > 5 else ''}): pass one of them (e.g. {steps[-1]}), or --checkpoints-dir "
            f"{path} for every step."
        )
    return None
