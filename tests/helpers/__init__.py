"""Shared test helpers: multi-process gloo runs, a tiny Llama and tokenizer, a reference forward."""
