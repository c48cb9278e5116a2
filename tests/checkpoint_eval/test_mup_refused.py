"""A Llama trained with spectral µP (current Nanotron's `SpectralMupInit`) is refused before anything
is built: main's attention then scales scores by 1/head_dim, the engine's by 1/sqrt(head_dim)."""

from __future__ import annotations

import shutil

import pytest
import yaml

from lighteval_nanotron.checkpoints.format import read_checkpoint_model
from lighteval_nanotron.errors import UnsupportedModelError
from lighteval_nanotron.models.families import family_of_config
from tests.checkpoint_eval.tiny_hf import convert_tiny


def test_checkpoint_trained_with_mup_is_refused(tmp_path):
    _, folder = convert_tiny(tmp_path / "tiny", seed=0)
    assert read_checkpoint_model(folder).model_config is not None  # the converted one reads
    mup = tmp_path / "mup"
    shutil.copytree(folder, mup)
    training = yaml.safe_load((mup / "config.yaml").read_text())
    training["model"]["init_method"] = {"use_mup": True}
    (mup / "config.yaml").write_text(yaml.safe_dump(training))
    with pytest.raises(UnsupportedModelError, match="spectral µP"):
        read_checkpoint_model(mup)


def test_live_mup_model_config_is_refused(tmp_path):
    """What the engine's setup checks of a live model (the hook): the config main's `ModelArgs` marks."""
    _, folder = convert_tiny(tmp_path / "tiny", seed=0)
    config = read_checkpoint_model(folder).model_config
    family = family_of_config(config)
    family.check_config(config)
    config._is_using_mup = True
    with pytest.raises(UnsupportedModelError, match="1/sqrt"):
        family.check_config(config)
