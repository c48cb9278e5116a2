"""Tasks: configs, docs, few-shot examples, prompts and the task registry (lighteval's task API)."""

from lighteval_nanotron.requests import Doc, SamplingMethod
from lighteval_nanotron.tasks.config import LightevalTaskConfig
from lighteval_nanotron.tasks.data_dirs import data_dirs_kept, get_data_dirs, set_data_dirs
from lighteval_nanotron.tasks.lighteval_task import LightevalTask
from lighteval_nanotron.tasks.prompt_manager import PromptManager
from lighteval_nanotron.tasks.registry import Registry

__all__ = [
    "Doc",
    "LightevalTask",
    "LightevalTaskConfig",
    "PromptManager",
    "Registry",
    "SamplingMethod",
    "data_dirs_kept",
    "get_data_dirs",
    "set_data_dirs",
]
