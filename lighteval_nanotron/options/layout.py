"""Where an evaluation runs: its tensor, pipeline and data parallel sizes and its device.

`eval` (`CheckpointEvalConfig`) and the hook's asynchronous evaluations (`AsyncEvaluationConfig`)
both include this dataclass, so a launched evaluation's `eval` flags are generated from the same
declarations that parse them (`options.flags.as_arguments`).
"""

from dataclasses import dataclass

from lighteval_nanotron.options.base import Options


@dataclass(kw_only=True)
class LayoutOptions(Options):
    """Where the evaluation runs."""

    tp: int = 1
    """Tensor parallel size of the evaluation (any layout, not necessarily the training's); the
    evaluation runs on `tp x pp x dp` processes."""

    pp: int = 1
    """Pipeline parallel size of the evaluation."""

    dp: int = 1
    """Data parallel size of the evaluation."""

    cpu: bool = False
    """Run on CPU processes with gloo (Nanotron patched by `enable_cpu_support()`); default: GPUs with NCCL."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("tp", "pp", "dp"):
            self.check_positive(name, "or remove it")

    @property
    def world_size(self) -> int:
        """The number of processes of the layout: `tp x pp x dp`."""
        return self.tp * self.pp * self.dp
