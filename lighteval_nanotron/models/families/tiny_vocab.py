"""What every family's tiny test models (`<family>/tiny.py`) share: the vocabulary of the tests'
tokenizer (`tests/helpers/tiny_model.py`: GPT-2's byte-level BPE cut to 1023 tokens, plus
`<|endoftext|>` = 1023 as bos, eos and pad)."""

VOCAB_SIZE = 1024
EOS_ID = VOCAB_SIZE - 1
