"""The Hugging Face libraries' own progress bars ("Loading weights" for every model
transformers loads, "Writing model shards" when one is saved): drawn on stderr, past
ragdesk's progress lines, its ``--json`` output and the window's log, so they show only when
asked for (``-v``). Downloads keep their progress: ragdesk counts their bytes with a bar of
its own that this switch does not silence."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def hf_progress_bars(shown: bool) -> Iterator[None]:
    """The libraries' bars on (``shown``) or off while the block runs, as they were after."""
    if shown:
        yield
        return
    hub = importlib.import_module("huggingface_hub.utils.tqdm")
    # the module itself (huggingface_hub.utils re-exports its tqdm class under its name);
    # transformers copies its switch from it when imported, which the block may do
    hub_was = not hub.are_progress_bars_disabled()
    hf = _transformers_logging()
    hf_was = hf.is_progress_bar_enabled() if hf is not None else None
    hub.disable_progress_bars()
    if hf is not None:
        hf.disable_progress_bar()
    try:
        yield
    finally:
        if hub_was:
            hub.enable_progress_bars()
        hf = _transformers_logging()  # imported within the block, it copied "off"
        if hf is not None and (hf_was if hf_was is not None else hub_was):
            hf.enable_progress_bar()


def _transformers_logging() -> Any:
    """transformers' logging module where transformers is imported (never importing it: a
    command may answer without it), else None."""
    if "transformers" not in sys.modules:
        return None
    from transformers.utils import logging as hf_logging

    return hf_logging
