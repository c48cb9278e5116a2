"""`lighteval-nanotron train` and `python -m lighteval_nanotron.training.run_train` parse the same arguments."""

import argparse

from lighteval_nanotron.cli import train_cmd
from lighteval_nanotron.training import run_train


def test_train_verb_registers_run_train_arguments():
    parser = argparse.ArgumentParser()
    train_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "--config-file", "configs/tiny_cpu_train.yaml", "--cpu", "--nproc", "4"])
    assert (args.config_file, args.cpu, args.nproc) == ("configs/tiny_cpu_train.yaml", True, 4)
    assert args.func is run_train.run


def test_missing_config_and_nproc_without_cpu_are_usage_errors(tmp_path, capsys):
    assert run_train.main(["--config-file", str(tmp_path / "nope.yaml")]) == 2
    config = tmp_path / "train.yaml"
    config.write_text("general: {}\n")
    assert run_train.main(["--config-file", str(config), "--nproc", "2"]) == 2
    assert "add --cpu" in capsys.readouterr().err
