"""Importing Nanotron (0.4 and GitHub main) where it was not written to run: which variant is installed
(`variant`), an import order that works (`imports`), and pure-PyTorch stand-ins for the CUDA-only packages
it imports (flash-attn, grouped_gemm; `stand_ins` holds their policy), on GPU machines as on CPU ones;
and an upstream bug adapted on every device: checkpoint shapes under numpy 2 (`numpy2`). See docs/cpu.md.
"""
