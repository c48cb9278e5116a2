"""The training data loaders of `run_train`: a Hugging Face text dataset, a synthetic token stream, and
current Nanotron's per-stage loader wrapper.
"""
