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


@contextlib.contextmanager
def hf_progress_bars(shown: bool) -> Iterator[None]:
    """The libraries' bars on (``shown``) or off while the block runs, as they were after."""
    if shown:
        yield
        return
    if "transformers" not in sys.modules:
        # transformers takes its bars' switch from huggingface_hub's when it is imported,
        # which a command may do later or never (answers are read without it); the module
        # itself, as huggingface_hub.utils re-exports its tqdm class under its name
        hub = importlib.import_module("huggingface_hub.utils.tqdm")
        enabled = not hub.are_progress_bars_disabled()
        disable, enable = hub.disable_progress_bars, hub.enable_progress_bars
    else:
        from transformers.utils import logging as hf_logging

        enabled = hf_logging.is_progress_bar_enabled()
        disable, enable = hf_logging.disable_progress_bar, hf_logging.enable_progress_bar
    disable()
    try:
        yield
    finally:
        if enabled:
            enable()
