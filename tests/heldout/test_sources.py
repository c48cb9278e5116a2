"""Held-out sources: text tokenized as the training loader does, bytes of the original text, Nanoset
folders as datatrove writes them (2- and 4-byte tokens), the fixed subset, and the refusals."""

import json

import numpy as np
import pytest
from datasets import Dataset

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.heldout import HeldOutSpec, build_held_out_set, held_out_specs, parse_held_out_option
from lighteval_nanotron.heldout.windows import text_stream, token_bytes
from lighteval_nanotron.training.data.dataloader import token_chunks
from tests.helpers.tiny_model import VOCAB_SIZE, tiny_tokenizer
from tests.models.held_out_cases import text_token_documents, write_nanoset, write_text_jsonl

LENGTH = 16


def _build(path, tokens=10_000, length=LENGTH, vocab_size=VOCAB_SIZE, **spec):
    return build_held_out_set(HeldOutSpec("d", str(path), tokens, **spec), tiny_tokenizer(), length, vocab_size, 256)


def test_text_windows_are_the_training_loaders_rows(tmp_path):
    source = write_text_jsonl(tmp_path / "web.jsonl", documents=12)
    held_out = _build(source)
    texts = [json.loads(line)["text"] for line in source.read_text().splitlines()]
    rows = token_chunks(Dataset.from_dict({"text": texts}), tiny_tokenizer(), "text", LENGTH)
    assert held_out.windows.tolist() == rows["input_ids"]
    assert held_out.description["selection"] == "every document, in order"
    assert "larger than the data" in held_out.description["notes"][0]


def test_bytes_are_the_original_texts_utf8_bytes():
    tokenizer = tiny_tokenizer()
    texts = ["Café au lait, naïve — 東京 ✓.", "  leading spaces and trailing  ", "plain ascii"]
    ids, sizes, documents = text_stream(texts, tokenizer, None)
    assert documents == 3
    assert sizes.sum() == sum(len(text.encode("utf-8")) for text in texts)
    eos = tokenizer.eos_token_id
    assert all(size == 0 for token, size in zip(ids, sizes) if token == eos)
    encoding = tokenizer.backend_tokenizer.encode(texts[0])
    assert token_bytes(texts[0], encoding.offsets, encoding.special_tokens_mask).sum() == len(texts[0].encode())


def test_window_bytes_add_up_to_their_targets(tmp_path):
    source = write_text_jsonl(tmp_path / "web.jsonl", documents=12)
    held_out = _build(source)
    total = sum(len(json.loads(line)["text"].encode()) for line in source.read_text().splitlines())
    assert 0 < held_out.target_bytes.sum() <= total
    assert (held_out.target_bytes > 0).all()


def test_a_budget_smaller_than_the_data_is_a_fixed_subset(tmp_path):
    source = write_text_jsonl(tmp_path / "web.jsonl", documents=40)
    first, again = _build(source, tokens=3 * LENGTH), _build(source, tokens=3 * LENGTH)
    assert first.windows.shape == (3, LENGTH + 1)
    assert first.windows.tolist() == again.windows.tolist()
    other_seed = _build(source, tokens=3 * LENGTH, seed=5)
    assert other_seed.windows.tolist() != first.windows.tolist()
    assert not first.description["notes"]


@pytest.mark.parametrize("token_size", [2, 4])
def test_nanoset_chunks_in_file_order(tmp_path, token_size):
    files = [text_token_documents([30, 50, 7], seed=token_size + file) for file in range(2)]
    folder = write_nanoset(tmp_path / "ns", files, token_size=token_size)
    held_out = _build(folder)
    width = LENGTH + 1
    expected = []
    for documents in files:
        stream = [token for doc in documents for token in doc]
        expected += [stream[i * width : (i + 1) * width] for i in range(len(stream) // width)]
    assert held_out.windows.tolist() == expected
    assert held_out.description["token_size"] == token_size
    decoded = tiny_tokenizer().decode(expected[0][1:], skip_special_tokens=True)
    assert held_out.target_bytes[0] == len(decoded.encode("utf-8"))


def test_nanoset_without_metadata_reads_two_byte_tokens(tmp_path):
    (document,) = text_token_documents([100])
    folder = write_nanoset(tmp_path / "ns", [[document]])
    for metadata in folder.glob("*.metadata"):
        metadata.unlink()
    assert _build(folder).windows[0].tolist() == document[: LENGTH + 1]


@pytest.mark.parametrize(
    "case, message",
    [
        ("odd_size", "domain 'd': .* not a whole number of 2-byte tokens"),
        ("four_byte_tokens_read_as_two", "domain 'd': .* it holds 4-byte tokens: every other token"),
        ("two_byte_tokens_read_as_four", "or its 2-byte tokens were read as 4 bytes"),
        ("link_to_nothing", "domain 'd': .*zz.ds is not a file \\(a folder, or a link to nothing\\)"),
        ("undecodable_metadata", "domain 'd': .*metadata cannot be read \\(UnicodeDecodeError"),
        ("id_in_the_padded_vocabulary", "token id 1030 .* is not a token of the model's tokenizer, though it fits"),
        ("two_tokenizers", "domain 'd': .* name several tokenizers \\(gpt2, tiny\\)"),
        ("beyond_vocabulary", "does not fit the model's vocabulary"),
        ("beyond_positions", "beyond the model's 256 positions"),
        ("no_files", r"has no \.jsonl, \.json, \.parquet or \*\.ds files"),
        ("not_text", "not text"),
    ],
)
def test_refusals(tmp_path, case, message):
    folder = tmp_path / "src"
    length = LENGTH
    if case == "odd_size":
        write_nanoset(folder, [[list(range(100))]])
        next(folder.glob("*.ds")).write_bytes(b"\x00" * 101)
    elif case == "four_byte_tokens_read_as_two":  # datatrove's metadata left behind: read as 2 bytes, "!" between ids
        write_nanoset(folder, [text_token_documents([300])], token_size=4)
        for metadata in folder.glob("*.metadata"):
            metadata.unlink()
    elif case == "link_to_nothing":  # a shard on shared storage deleted under its link
        write_nanoset(folder, [text_token_documents([300])])
        (folder / "zz.ds").symlink_to(tmp_path / "deleted.ds")
    elif case == "undecodable_metadata":
        write_nanoset(folder, [text_token_documents([300])])
        next(folder.glob("*.metadata")).write_bytes(b"\xff\xfe|2\n")
    elif case == "id_in_the_padded_vocabulary":  # rows 1024..1087 of a padded vocabulary: no token decodes to them
        (document,) = text_token_documents([400])
        write_nanoset(folder, [[[token if index % 50 else 1030 for index, token in enumerate(document)]]])
    elif case == "two_tokenizers":  # the first windows are the model's tokenizer's: the check would pass
        write_nanoset(folder, [text_token_documents([300])])
        write_nanoset(tmp_path / "other", [text_token_documents([300], seed=1)], tokenizer_name="gpt2")
        for file in (tmp_path / "other").iterdir():
            file.rename(folder / file.name.replace("_00000_", "_00001_"))
    elif case == "two_byte_tokens_read_as_four":
        write_nanoset(folder, [text_token_documents([300])], token_size=2)
        for metadata in folder.glob("*.metadata"):
            metadata.write_text("tiny|4\n")
    elif case == "beyond_vocabulary":
        write_nanoset(folder, [[list(range(1100, 1200))]])
    elif case == "beyond_positions":
        folder = write_text_jsonl(tmp_path / "web.jsonl")
        length = 300
    elif case == "no_files":
        folder.mkdir()
        (folder / "notes.txt").write_text("hello")
    else:
        folder.mkdir()
        (folder / "rows.jsonl").write_text(json.dumps({"text": 3}) + "\n")
    with pytest.raises(ConfigError, match=message):
        _build(folder, length=length, vocab_size=VOCAB_SIZE + 64)  # a model vocabulary padded beyond the tokenizer


def test_specs_from_the_section_and_the_command_line():
    specs = held_out_specs({"web": "/data/web", "code": {"path": "/data/code", "tokens": 5, "seed": 2}}, tokens=9)
    assert [(s.name, s.path, s.tokens, s.seed) for s in specs] == [
        ("web", "/data/web", 9, 0),
        ("code", "/data/code", 5, 2),
    ]
    assert parse_held_out_option("web=/a=b.jsonl").path == "/a=b.jsonl"
    for bad, message in [
        ({"_micro": "/x"}, "a name is letters"),
        ({"web": {"path": "/x", "colour": 1}}, "unknown key"),
        ({"web": {"path": "/x", "tokens": 0}}, "positive number of tokens"),
        ({"web": {"path": "/x", "text_column": ["text"]}}, "text_column is \\['text'\\]"),
        ({"web": {"path": "/x", "split": 3}}, "split is 3"),
        ({"web": {"path": "/x", "subset": ""}}, "subset is ''"),
        (["web=/x", "web=/y"], "given twice"),
        (["web"], "^'web'.*NAME=PATH"),  # named as the way in writes it (the flag, the key)
    ]:
        with pytest.raises(ConfigError, match=message):
            held_out_specs(bad)


def _permuted_tokenizer(seed: int):
    """Another tokenizer whose ids fit the model's vocabulary: the tiny tokenizer's tokens and merges
    under a seeded permutation of their ids (the end-of-text token keeps its id)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    content = json.loads(tiny_tokenizer().backend_tokenizer.to_str())
    vocab = content["model"]["vocab"]
    movable = sorted(token for token, index in vocab.items() if index < VOCAB_SIZE - 1)
    ids = np.random.default_rng(seed).permutation([vocab[token] for token in movable]).tolist()
    content["model"]["vocab"] = {**vocab, **dict(zip(movable, ids))}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(content)))


def test_a_nanoset_of_another_tokenizer_is_refused_even_when_its_ids_fit(tmp_path):
    """Every id fits the vocabulary, so only the tokenization itself can tell: decoding with the
    model's tokenizer and encoding again gives back most of its own tokens, few of another's."""
    texts = [json.loads(line)["text"] for line in write_text_jsonl(tmp_path / "web.jsonl").read_text().splitlines()]
    own, eos = tiny_tokenizer(), tiny_tokenizer().eos_token_id
    documents = [own(text, add_special_tokens=False)["input_ids"] + [eos] for text in texts]
    accepted = _build(write_nanoset(tmp_path / "own", [documents]))
    assert accepted.description["tokenizer_agreement"] >= 0.95  # document ends and EOS tokens included
    other = _permuted_tokenizer(seed=3)
    foreign = [other(text, add_special_tokens=False)["input_ids"] + [eos] for text in texts]
    assert max(max(doc) for doc in foreign) < VOCAB_SIZE
    with pytest.raises(ConfigError) as refused:
        _build(write_nanoset(tmp_path / "other", [foreign], tokenizer_name="gpt2-permuted"))
    message = str(refused.value)
    assert "was not tokenized with the model's tokenizer (its metadata names 'gpt2-permuted')" in message
    assert "Tokenize the data with the model's tokenizer, or give its text" in message


def test_a_tokenizer_json_that_truncates_or_pads_tokenizes_whole_documents(tmp_path):
    """transformers keeps a tokenizer.json's truncation and padding on its backend (switched off per
    call of the tokenizer); held-out text is encoded by the backend: each document was cut to 8
    tokens (its bytes all counted: 4x the bytes per token) and padded, and the tokenizer check
    refused the model's own Nanoset."""
    from lighteval_nanotron.setup.tokenizer import load_tokenizer

    saved = tiny_tokenizer()
    saved.backend_tokenizer.enable_truncation(max_length=8)
    saved.backend_tokenizer.enable_padding(pad_id=saved.eos_token_id, pad_token=saved.eos_token)
    saved.save_pretrained(tmp_path / "tokenizer")
    tokenizer = load_tokenizer(str(tmp_path / "tokenizer"))
    assert tokenizer.backend_tokenizer.truncation["max_length"] == 8
    source = write_text_jsonl(tmp_path / "web.jsonl", documents=12)
    spec = HeldOutSpec("d", str(source), 10_000)
    held_out = build_held_out_set(spec, tokenizer, LENGTH, VOCAB_SIZE, 256)
    plain = _build(source)
    assert held_out.windows.tolist() == plain.windows.tolist()
    assert held_out.target_bytes.tolist() == plain.target_bytes.tolist()
    documents = [[int(token) for token in plain.windows[:, 1:].reshape(-1)]]
    nanoset = build_held_out_set(
        HeldOutSpec("n", str(write_nanoset(tmp_path / "ns", [documents]))), tokenizer, LENGTH, VOCAB_SIZE, 256
    )
    assert nanoset.description["tokenizer_agreement"] >= 0.95
    assert tokenizer.backend_tokenizer.truncation["max_length"] == 8  # as it was: other callers' settings stay
    assert tokenizer.backend_tokenizer.padding is not None


def test_long_documents_are_encoded_only_as_far_as_the_budget_needs():
    """A budget one long document fills: batches of 256 documents encoded 40 books of 200,000
    characters (all held at once: gigabytes for real books) to use one."""
    pulled = []

    def books():
        for index in range(40):
            pulled.append(index)
            yield "the river ran past the old mill " * 6_250

    ids, sizes, documents = text_stream(books(), tiny_tokenizer(), needed_tokens=100)
    assert documents == 1 and len(ids) > 100 and sizes.sum() == 200_000
    assert len(pulled) <= 5  # BATCH_CHARACTERS: 1,000,000 characters a batch
