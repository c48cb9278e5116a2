"""`lighteval-nanotron convert`: turn a Hugging Face (Llama, Starcoder2, Qwen2) or GGUF (Llama) checkpoint into a
Nanotron checkpoint.

Usage:
    lighteval-nanotron convert hf path/to/hf_llama checkpoints/llama-nanotron [--dtype bfloat16]
    lighteval-nanotron convert gguf SmolLM2-135M-Instruct.Q4_1.gguf checkpoints/smollm2 [--dtype float32]

DST must be a new or empty folder. It receives config.yaml, model_config.json,
checkpoint_metadata.json, the weights under model/ (written at TP1/PP1, loadable at any TP/PP
layout) and the tokenizer files. See docs/convert.md.
"""

from __future__ import annotations

import argparse
import time

from lighteval_nanotron.options.flags import expanded_path

DTYPE_CHOICES = ("float32", "bfloat16", "float16")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `convert` verb (sub-verbs `hf` and `gguf`) to the `lighteval-nanotron` parser."""
    parser = subparsers.add_parser(
        "convert",
        help="convert a Hugging Face (Llama, Starcoder2, Qwen2) or GGUF (Llama) checkpoint into a Nanotron checkpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    formats = parser.add_subparsers(dest="source_format", required=True, metavar="FORMAT")

    hf = formats.add_parser(
        "hf", help="a Hugging Face Llama, Starcoder2 or Qwen2 (-MoE) folder (config.json + safetensors)"
    )
    hf.add_argument("src", type=expanded_path, help="Hugging Face model folder")
    hf.add_argument("dst", type=expanded_path, help="new Nanotron checkpoint folder")
    hf.add_argument("--dtype", choices=DTYPE_CHOICES, default=None, help="weight dtype (default: the source's)")
    hf.set_defaults(func=run_hf)

    gguf = formats.add_parser("gguf", help="a GGUF Llama file (llama.cpp), dequantized")
    gguf.add_argument("src", type=expanded_path, help="the .gguf file")
    gguf.add_argument("dst", type=expanded_path, help="new Nanotron checkpoint folder")
    gguf.add_argument("--dtype", choices=DTYPE_CHOICES, default="float32", help="weight dtype (default: float32)")
    gguf.add_argument(
        "--tokenizer",
        type=expanded_path,
        default=None,
        help="Hugging Face tokenizer folder to copy instead of rebuilding it",
    )
    gguf.set_defaults(func=run_gguf)
    return parser


def _report(summary, started: float) -> int:
    print(
        f"wrote {summary.folder}: {summary.num_parameters:,} parameters, {str(summary.dtype).removeprefix('torch.')}, "
        f"rope_theta={summary.rope_theta:g}, tokenizer={'yes' if summary.tokenizer_saved else 'no'} "
        f"({time.perf_counter() - started:.1f} s)"
    )
    return 0


def run_hf(args: argparse.Namespace) -> int:
    from lighteval_nanotron.convert import convert_hf_to_nanotron

    started = time.perf_counter()
    return _report(convert_hf_to_nanotron(args.src, args.dst, dtype=args.dtype), started)


def run_gguf(args: argparse.Namespace) -> int:
    from lighteval_nanotron.convert import convert_gguf_to_nanotron

    started = time.perf_counter()
    return _report(convert_gguf_to_nanotron(args.src, args.dst, dtype=args.dtype, tokenizer=args.tokenizer), started)
