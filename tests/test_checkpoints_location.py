"""seqlab.checkpoints: where the course's checkpoints are found (see its module docstring)."""

import pytest

from seqlab import checkpoints, pretrained


def test_the_environment_variable_wins_then_the_source_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv(checkpoints.ENV_VAR, str(tmp_path))
    assert checkpoints.checkpoint_dir() == tmp_path
    monkeypatch.delenv(checkpoints.ENV_VAR)
    root = checkpoints.source_checkout()
    assert root is not None and checkpoints.checkpoint_dir() == root / "data" / "checkpoints"
    assert pretrained.checkpoint_dir is checkpoints.checkpoint_dir           # the name the notebooks use


def test_an_installed_seqlab_asks_for_the_environment_variable(monkeypatch):
    monkeypatch.delenv(checkpoints.ENV_VAR, raising=False)
    monkeypatch.setattr(checkpoints, "source_checkout", lambda: None)
    with pytest.raises(FileNotFoundError, match=r"set \$SEQLAB_CHECKPOINTS to the folder that holds them"):
        checkpoints.checkpoint_dir()
