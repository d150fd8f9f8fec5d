"""``ask`` never checked checksums, so flipped bytes in ``embeddings.npy`` or
``passages.sqlite`` were used silently until ``index verify``.

Now the first open of a snapshot hashes the files it reads once and records a stamp per file
(``verified.json``); later opens hash only files whose stamp changed, and a mismatch is
refused like other damage. Rot that keeps every stamp is found by ``index verify``, which
drops the stamp so that the next open refuses too.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, cast

import pytest

from ragdesk.core.app import AppContext
from ragdesk.core.errors import Cancelled, CorruptSnapshotError
from ragdesk.core.progress import CancelToken, ProgressUpdate
from ragdesk.core.snapshots import checked, open_snapshot
from ragdesk.core.snapshots.checked import CHECKING, VERIFIED_FILE, read_verified, stamp_of
from ragdesk.core.snapshots.manifest import EMBEDDINGS_FILE, read_manifest, sha256_file
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE
from tests.test_cli_ask import SNAP, _models, snapshot_dir  # noqa: F401  (fixture)

HOUR_AGO = time.time() - 3600


def _folder(data_dir: Path) -> Path:
    return next(p for p in (data_dir / "snapshots").iterdir() if p.is_dir())


def _settle(folder: Path) -> None:
    """Files written an hour ago, as a snapshot's are by its first use: a file modified
    within the last seconds gets no stamp (it could change again within one tick)."""
    for p in folder.iterdir():
        if p.is_file():
            os.utime(p, (HOUR_AGO, HOUR_AGO))


def _flip(path: Path) -> tuple[int, int]:
    """Flip bits of one byte of ``path`` where nothing but the checksum notices: a float in
    the middle of the embeddings, the case of a letter of a passage's text (SQLite checks no
    text); (offset, mask), to flip it back with :func:`_xor`."""
    data = path.read_bytes()
    spot = (data.index(b" the ") + 1, 0x20) if path.suffix == ".sqlite" else (
        len(data) // 2, 0xFF)
    _xor(path, *spot)
    return spot


def _xor(path: Path, offset: int, mask: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ mask]))


def _count_hashes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the open path hashes, in order, from now on."""
    hashed: list[str] = []
    real = sha256_file

    def counting(path: Path, *args: Any, **kwargs: Any) -> str:
        hashed.append(path.name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(checked, "sha256_file", counting)
    return hashed


def _whole(cli: Any) -> None:
    """The catalog lists the snapshot ready and active, and it verifies."""
    code, out, err = cli("index", "list", "--json")
    assert code == 0, err
    assert [(s["name"], s["state"], s["active"]) for s in json.loads(out)] == [
        (SNAP, "ready", True)]
    code, _, err = cli("index", "verify", SNAP)
    assert code == 0, err


def _ask(cli: Any, tiny_models: Any) -> tuple[int, str, str]:
    result: tuple[int, str, str] = cli("ask", "who wrote the first book", *_models(tiny_models),
                                       "--docs", "2", "--max-new-tokens", "3")
    return result


@pytest.mark.parametrize("victim", [EMBEDDINGS_FILE, PASSAGES_FILE])
def test_ask_refuses_flipped_bytes(cli: Any, snapshot_dir: Path, tiny_models: Any,  # noqa: F811
                                   victim: str) -> None:
    folder = _folder(snapshot_dir)
    _settle(folder)
    code, _, err = _ask(cli, tiny_models)
    assert code == 0, err
    path = folder / victim
    spot = _flip(path)

    code, out, err = _ask(cli, tiny_models)
    assert code == 1, (out, err)  # it answered from the damaged snapshot before
    assert f"The snapshot {SNAP!r} is damaged" in err
    assert f"{victim}: checksum mismatch" in err
    assert f"ragdesk index verify {SNAP}" in err  # the hint: what to do
    assert "Traceback" not in err and "internal error" not in err
    assert out == ""  # no answer from the damaged snapshot
    assert victim not in read_verified(folder)
    code, _, err = cli("index", "verify", SNAP)
    assert code == 1 and f"{victim}: checksum mismatch" in err

    _xor(path, *spot)  # the byte restored: whole again, and asked again
    _whole(cli)
    code, _, err = _ask(cli, tiny_models)
    assert code == 0, err


def test_a_flip_with_size_and_mtime_put_back_is_still_refused(
        snapshot_dir: Path) -> None:  # noqa: F811
    """What a careful tool or a restore from backup does: the ctime still moves."""
    folder = _folder(snapshot_dir)
    _settle(folder)
    app = AppContext(snapshot_dir)
    try:
        open_snapshot(app.data, app.catalog).close()
        path = folder / EMBEDDINGS_FILE
        before = path.stat()
        _flip(path)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert path.stat().st_mtime_ns == before.st_mtime_ns
        with pytest.raises(CorruptSnapshotError, match=r"embeddings\.npy: checksum mismatch"):
            open_snapshot(app.data, app.catalog)
    finally:
        app.close()


def test_later_opens_hash_only_what_changed(snapshot_dir: Path,  # noqa: F811
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(snapshot_dir)
    _settle(folder)
    hashed = _count_hashes(monkeypatch)
    app = AppContext(snapshot_dir)
    try:
        open_snapshot(app.data, app.catalog).close()
        assert sorted(hashed) == [EMBEDDINGS_FILE, PASSAGES_FILE]
        for _ in range(3):
            open_snapshot(app.data, app.catalog).close()
        assert len(hashed) == 2  # three more opens, nothing hashed

        os.utime(folder / PASSAGES_FILE, (HOUR_AGO - 60, HOUR_AGO - 60))  # touched
        open_snapshot(app.data, app.catalog).close()
        assert hashed[2:] == [PASSAGES_FILE]

        # A copy of the folder (new inodes) is hashed again, though its stamps came along.
        copy = folder.with_name(folder.name + "-copy")
        shutil.copytree(folder, copy, copy_function=shutil.copy2)
        shutil.rmtree(folder)
        copy.rename(folder)
        hashed.clear()
        open_snapshot(app.data, app.catalog).close()
        assert sorted(hashed) == [EMBEDDINGS_FILE, PASSAGES_FILE]
    finally:
        app.close()


def test_a_file_changed_seconds_ago_gets_no_stamp(snapshot_dir: Path) -> None:  # noqa: F811
    """A write within the same timestamp tick as the stamp would go unseen."""
    folder = _folder(snapshot_dir)
    os.utime(folder / PASSAGES_FILE, (HOUR_AGO, HOUR_AGO))
    os.utime(folder / EMBEDDINGS_FILE)  # now
    app = AppContext(snapshot_dir)
    try:
        open_snapshot(app.data, app.catalog).close()
    finally:
        app.close()
    assert sorted(read_verified(folder)) == [PASSAGES_FILE]


def test_rot_that_keeps_every_stamp_is_found_by_verify_then_refused(  # type: ignore[no-untyped-def]
        cli, snapshot_dir: Path) -> None:  # noqa: F811
    """Bytes that change below the file system keep size, mtime, ctime and inode: an open
    trusts the stamp (that is the price of not hashing 65 GB per question); ``verify``
    hashes everything, and drops the stamp, so the next open refuses too."""
    folder = _folder(snapshot_dir)
    _settle(folder)
    app = AppContext(snapshot_dir)
    try:
        open_snapshot(app.data, app.catalog).close()
        path = folder / EMBEDDINGS_FILE
        _flip(path)
        record = json.loads((folder / VERIFIED_FILE).read_text())
        record["files"][EMBEDDINGS_FILE].update(stamp_of(path.stat()))  # as if rot kept it
        (folder / VERIFIED_FILE).write_text(json.dumps(record))
        open_snapshot(app.data, app.catalog).close()  # trusted: the documented limit

        code, _, err = cli("index", "verify", SNAP)
        assert code == 1 and "embeddings.npy: checksum mismatch" in err
        assert EMBEDDINGS_FILE not in read_verified(folder)
        with pytest.raises(CorruptSnapshotError, match=r"embeddings\.npy: checksum mismatch"):
            open_snapshot(app.data, app.catalog)
    finally:
        app.close()


def test_the_first_check_reports_progress_and_can_be_cancelled(
        snapshot_dir: Path) -> None:  # noqa: F811
    folder = _folder(snapshot_dir)
    _settle(folder)
    manifest = read_manifest(folder)
    total = sum(cast(int, manifest.files[f]["size"]) for f in (EMBEDDINGS_FILE, PASSAGES_FILE))
    app = AppContext(snapshot_dir)
    try:
        cancel = CancelToken()
        cancel.cancel()
        with pytest.raises(Cancelled):
            open_snapshot(app.data, app.catalog, cancel=cancel)
        assert read_verified(folder) == {}  # nothing stamped by a cancelled check

        updates: list[ProgressUpdate] = []
        open_snapshot(app.data, app.catalog, progress=updates.append).close()
        assert updates and {u.message for u in updates} == {CHECKING}
        assert updates[-1].done == updates[-1].total == total
        updates.clear()
        open_snapshot(app.data, app.catalog, progress=updates.append).close()
        assert updates == []  # nothing to check, nothing reported
    finally:
        app.close()


def test_a_folder_that_cannot_be_written_still_opens(snapshot_dir: Path,  # noqa: F811
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Read-only media: the check runs, the stamp cannot be kept, and the snapshot answers."""
    folder = _folder(snapshot_dir)
    _settle(folder)

    def read_only(path: Path, obj: Any) -> None:
        raise PermissionError(13, "Read-only file system", str(path))

    monkeypatch.setattr(checked, "write_json_atomic", read_only)
    app = AppContext(snapshot_dir)
    try:
        index = open_snapshot(app.data, app.catalog)
        assert index.size == 10
        index.close()
    finally:
        app.close()
    assert "checked again at the next open" in caplog.text
    assert not (folder / VERIFIED_FILE).exists()


def test_an_import_records_its_own_checksums_as_the_first_check(
        tmp_path: Path, tiny_models: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import hashes every file for the manifest: that counts as the first check, so the
    first open of a large snapshot does not hash it all again; damage after it is still
    refused at the next open."""
    from ragdesk.core.snapshots import import_snapshot
    from tests.core.snapshots.util import open_data, write_jsonl

    # the import's files are seconds old here; a real large import's are minutes old by the
    # time its checksums are done
    monkeypatch.setattr(checked, "RACY_NS", 0)
    src = write_jsonl(tmp_path / "corpus.jsonl", list(tiny_models.corpus[:20]))
    data, catalog = open_data(tmp_path / "data")
    rec = import_snapshot(data, catalog, src, name="fresh", encoder=str(tiny_models.ctx_encoder))
    folder = data.snapshot_dir(rec.slug)
    assert sorted(read_verified(folder)) == [EMBEDDINGS_FILE, PASSAGES_FILE]
    hashed = _count_hashes(monkeypatch)
    open_snapshot(data, catalog, "fresh").close()
    assert hashed == []
    _flip(folder / EMBEDDINGS_FILE)
    with pytest.raises(CorruptSnapshotError, match="checksum mismatch"):
        open_snapshot(data, catalog, "fresh")
    assert hashed == [EMBEDDINGS_FILE]
