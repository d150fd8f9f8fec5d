"""The CLI puts the settings dialog's device, Hugging Face cache and threads into the
environment the model loaders read, before any command runs (a user's own variable wins)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragdesk.cli.main import main
from ragdesk.core.app import AppContext


def test_settings_reach_the_environment_before_a_command_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    ctx = AppContext(data)
    ctx.data.ensure()
    cache = tmp_path / "hf"
    ctx.settings.update({"device": "cpu", "hf_cache": str(cache), "threads": 3})
    ctx.close()
    # Empty: unset for apply_environment, and restored to what it was afterwards.
    for var in ("RAGDESK_DEVICE", "HF_HUB_CACHE", "HF_HOME"):
        monkeypatch.setenv(var, "")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the user's own setting wins
    assert main(["--data-dir", str(data), "index", "list", "--json"]) == 0
    capsys.readouterr()
    assert os.environ["RAGDESK_DEVICE"] == "cpu"
    assert os.environ["HF_HUB_CACHE"] == str(cache)
    assert os.environ["OMP_NUM_THREADS"] == "1"
