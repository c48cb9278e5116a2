"""What current Nanotron's Qwen2 (GitHub main) needs to run on CPU with gloo (`enable_cpu_support()`
applies it; docs/cpu.md): its pipeline P2P (`qwen.py:692` makes buffers on "cuda") becomes the
gloo-safe `CpuP2P`; the MoE router, whose float32 weight `nn/moe.py:44` makes on "cuda", is built
with cuda mapped to cpu; and its forward runs on the pipeline stages after the input one
(`_with_cu_seqlens_off_input_stage`)."""

from __future__ import annotations

import functools
from typing import Any

from lighteval_nanotron.models.families.base import CpuNeeds


def cpu_needs() -> CpuNeeds:
    from nanotron.models import qwen
    from nanotron.nn import moe

    return CpuNeeds(
        p2p_modules=(qwen,),
        run_on_cpu=((moe.Router, "__init__"),),
        replaced=((qwen.Qwen2Model, "forward", _with_cu_seqlens_off_input_stage(qwen.Qwen2Model.forward)),),
    )


def _with_cu_seqlens_off_input_stage(forward: Any) -> Any:
    """main's `Qwen2Model.forward` (qwen.py:758-810 at 2411b02) computes `cu_seqlens` from
    `position_ids.numel()` on every pipeline stage, but off the input stage `position_ids` is a
    `TensorPointer`: every PP > 1 forward fails there with an AttributeError. The input stage runs
    main's forward unchanged; another stage runs the same blocks with `cu_seqlens` pointing at the
    input stage, so the first decoder layer it runs receives it with the hidden states, as it
    receives `position_ids`."""
    from nanotron.parallel.pipeline_parallel.tensor_pointer import TensorPointer

    @functools.wraps(forward)
    def patched(self: Any, input_ids: Any, position_ids: Any) -> Any:
        if not isinstance(position_ids, TensorPointer):
            return forward(self, input_ids=input_ids, position_ids=position_ids)
        output = self.token_position_embeddings(input_ids=input_ids, position_ids=position_ids)
        states = {
            "hidden_states": output["input_embeds"],
            "position_ids": output["position_ids"],
            "cu_seqlens": TensorPointer(group_rank=position_ids.group_rank),
        }
        for decoder_layer in self.decoder:
            states = decoder_layer(**states)
        hidden_states = self.final_layer_norm(input=states["hidden_states"])["hidden_states"]
        return self.lm_head(x=hidden_states)["logits"]

    return patched
