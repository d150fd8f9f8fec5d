"""Which torch device models run on: ``RAGDESK_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``,
``mps`` or ``auto``), read by the encoders and the generators alike.

A foundation module (no torch import until ``auto`` has to look), so that the encoders,
which sit below the model registry, choose their device the same way the generators do.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeVar

from ragdesk.core.errors import MissingModelError

if TYPE_CHECKING:
    import torch

ModuleT = TypeVar("ModuleT", bound="torch.nn.Module")

DEVICE_ENV = "RAGDESK_DEVICE"


def select_device(device: str | None = None) -> str:
    """``device`` or ``$RAGDESK_DEVICE`` or ``cpu``; ``auto`` picks CUDA, then MPS, then CPU."""
    choice = (device or os.environ.get(DEVICE_ENV) or "cpu").strip().lower()
    if choice != "auto":
        return choice
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def to_device(model: ModuleT, device: str) -> ModuleT:
    """``model`` moved to ``device``; ``cpu`` leaves it where it was built (a caller that
    put it elsewhere on purpose keeps it there). A device this PyTorch cannot use is a
    :class:`MissingModelError` that says how to get back to the CPU."""
    if device == "cpu":
        return model
    try:
        return model.to(device)
    except (RuntimeError, AssertionError) as exc:
        raise MissingModelError(
            f"The model cannot be moved to the device {device!r}: {exc}",
            f"Set {DEVICE_ENV}=cpu, or install a PyTorch build for that device.") from exc
