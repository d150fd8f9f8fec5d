"""The settings dialog's model: validation, saving, restarts, the data folder's location
file, and the environment the loaders read."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ragdesk.core import preferences as prefs_mod
from ragdesk.core.paths import ENV_VAR, location_file, resolve_data_dir
from ragdesk.core.preferences import (
    Preferences,
    apply_environment,
    environment_overrides,
    load_preferences,
    restart_needed,
    save_preferences,
    validate,
)
from ragdesk.core.settings import Settings


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """platformdirs reads XDG_CONFIG_HOME on every call: the location file lands here."""
    cfg = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cfg))
    monkeypatch.delenv(ENV_VAR, raising=False)
    yield cfg
    prefs_mod._SET_FROM_SETTINGS.clear()


def test_validate_names_each_bad_field(tmp_path: Path) -> None:
    good = Preferences(data_dir=str(tmp_path / "not-yet" / "data"),
                       hf_cache=str(tmp_path / "hf"))
    assert validate(good) == {}  # folders that do not exist yet can be made
    a_file = tmp_path / "file.txt"
    a_file.write_text("x", encoding="utf-8")
    bad = replace(good, data_dir=str(a_file / "data"), device="gpu", threads=-1,
                  hf_cache="relative/cache",
                  answer={**good.answer, "mode": "word", "n_docs": 0, "num_beams": True})
    problems = validate(bad)
    assert set(problems) == {"data_dir", "device", "threads", "hf_cache", "answer.mode",
                             "answer.n_docs", "answer.num_beams"}
    assert "is a file" in problems["data_dir"] and "full path" in problems["hf_cache"]
    assert validate(replace(good, device=" AUTO ", hf_cache="")) == {}  # case, spaces
    assert "Choose a folder" in validate(replace(good, data_dir="  "))["data_dir"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_validate_refuses_a_read_only_folder(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert "cannot be written" in validate(Preferences(data_dir=str(ro / "d")))["data_dir"]
    finally:
        ro.chmod(0o700)


def test_save_reports_restarts_and_the_next_start_reads_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = Settings(data / "settings.json")
    old = load_preferences(settings, data)
    assert old.data_dir == str(data) and old.device == "cpu" and old.threads == 0
    assert old.answer["n_docs"] == settings.get("n_docs")

    live = replace(old, theme="dark", threads=2, answer={**old.answer, "n_docs": 8})
    assert save_preferences(settings, old, live) == []  # all of these apply at once
    elsewhere = tmp_path / "elsewhere"
    moved = replace(live, data_dir=str(elsewhere), device="auto", hf_cache=str(tmp_path / "h"))
    assert save_preferences(settings, live, moved) == ["data folder", "device",
                                                       "Hugging Face cache"]
    assert restart_needed(moved, moved) == []

    again = load_preferences(Settings(data / "settings.json"), elsewhere)
    assert again == moved
    assert location_file().read_text(encoding="utf-8").strip() == str(elsewhere)
    assert resolve_data_dir() == elsewhere
    os.environ[ENV_VAR] = str(tmp_path / "from-env")
    try:
        assert resolve_data_dir() == tmp_path / "from-env"  # the environment still wins
    finally:
        del os.environ[ENV_VAR]


def test_environment_applied_at_start_unless_the_user_set_it(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "settings.json")
    settings.update({"device": "cuda:0", "hf_cache": str(tmp_path / "hf"), "threads": 3})
    env: dict[str, str] = {"RAGDESK_DEVICE": "cpu"}
    apply_environment(settings, env)
    assert env == {"RAGDESK_DEVICE": "cpu", "HF_HUB_CACHE": str(tmp_path / "hf"),
                   "OMP_NUM_THREADS": "3"}
    # What the settings put there is not the user's override; what the user set is.
    assert environment_overrides(env) == {"device": "RAGDESK_DEVICE=cpu"}
    env2: dict[str, str] = {"HF_HOME": "/somewhere"}
    apply_environment(settings, env2)
    assert "HF_HUB_CACHE" not in env2 and env2["RAGDESK_DEVICE"] == "cuda:0"
    assert environment_overrides(env2)["hf_cache"] == "HF_HOME=/somewhere"


def test_a_device_pytorch_cannot_use_is_refused_once_pytorch_is_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    good = Preferences(data_dir=str(tmp_path / "d"))
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 1),
        backends=types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: False)))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert validate(replace(good, device="cuda")) == {}
    assert validate(replace(good, device="cuda:0")) == {}
    assert "1 CUDA device" in validate(replace(good, device="cuda:1"))["device"]
    assert "MPS" in validate(replace(good, device="mps"))["device"]
    assert validate(replace(good, device="auto")) == {}
    monkeypatch.delitem(sys.modules, "torch")
    assert validate(replace(good, device="mps")) == {}  # not loaded: not imported to check
