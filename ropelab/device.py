"""The device the book's notebooks run on.

CUDA when it is available, the CPU otherwise; the environment variable
``ROPELAB_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``, ...) overrides
both. Notebooks call :func:`default_device` and never print its result, so
their stored outputs are the same on every machine.
"""

from __future__ import annotations

import os

import torch

__all__ = ["default_device", "ENV_VAR"]

ENV_VAR = "ROPELAB_DEVICE"


def default_device() -> torch.device:
    """The device to use: ``$ROPELAB_DEVICE`` if set, else ``cuda`` if available, else
    ``cpu``.

    Raises:
        ValueError: ``ROPELAB_DEVICE`` is not a device string torch understands,
            or names CUDA on a machine without it.
    """
    wanted = os.environ.get(ENV_VAR, "").strip()
    if wanted:
        try:
            device = torch.device(wanted)
        except RuntimeError as err:
            raise ValueError(
                f"{ENV_VAR}={wanted!r} is not a torch device string ({err})"
            ) from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                f"{ENV_VAR}={wanted!r} asks for CUDA, but torch.cuda.is_available() is "
                "False"
            )
        return device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
