"""Tests for ropelab.device: CUDA when present, ROPELAB_DEVICE overrides."""

import pytest
import torch

from ropelab import default_device


def test_default_follows_cuda(monkeypatch):
    monkeypatch.delenv("ROPELAB_DEVICE", raising=False)
    assert default_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device() == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_device() == torch.device("cpu")


def test_env_var_overrides(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("ROPELAB_DEVICE", "cpu")
    assert default_device() == torch.device("cpu")
    monkeypatch.setenv("ROPELAB_DEVICE", "cuda:1")
    assert default_device() == torch.device("cuda", 1)


def test_env_var_errors(monkeypatch):
    monkeypatch.setenv("ROPELAB_DEVICE", "gpu0")
    with pytest.raises(ValueError, match="ROPELAB_DEVICE='gpu0' is not a torch device string"):
        default_device()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("ROPELAB_DEVICE", "cuda")
    with pytest.raises(ValueError, match="asks for CUDA, but torch.cuda.is_available\\(\\) is False"):
        default_device()
