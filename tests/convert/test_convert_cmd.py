import pytest

from lighteval_nanotron.cli.main import main
from tests.convert.tiny_llama import tiny_hf_llama, tiny_tokenizer, write_tiny_gguf


@pytest.mark.distributed  # converts
def test_convert_hf_and_gguf_commands(tmp_path, capsys):
    model = tiny_hf_llama(tie=True)
    model.save_pretrained(tmp_path / "hf")
    assert main(["convert", "hf", str(tmp_path / "hf"), str(tmp_path / "from_hf"), "--dtype", "bfloat16"]) == 0
    assert "bfloat16" in capsys.readouterr().out
    assert (tmp_path / "from_hf" / "model").is_dir()

    write_tiny_gguf(tmp_path / "tiny.gguf", model, tiny_tokenizer(), "Q8_0")
    assert main(["convert", "gguf", str(tmp_path / "tiny.gguf"), str(tmp_path / "from_gguf")]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "rope_theta=50000" in out and "tokenizer=yes" in out
    assert (tmp_path / "from_gguf" / "tokenizer.json").is_file()


def test_convert_errors_exit_2_with_the_reason(tmp_path, capsys):
    assert main(["convert", "gguf", str(tmp_path / "missing.gguf"), str(tmp_path / "out")]) == 2
    assert "missing.gguf not found" in capsys.readouterr().err
    assert main(["convert", "hf", str(tmp_path), str(tmp_path / "out")]) == 2
    assert "config.json" in capsys.readouterr().err
