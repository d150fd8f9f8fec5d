"""Two threads writing the real ``Settings`` lost thousands of 6,000 writes
(``FileNotFoundError``: both threads used the same temporary file name, one renamed it away
under the other). Two writers in one process, and two ``Settings`` objects on one file (as
two processes have), must lose none."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from ragdesk.core.settings import Settings

WRITES = 6000  # the count (each write fsyncs: tens of seconds on a busy disk)


def _hammer(settings: Settings, key: str, errors: list[BaseException], n: int) -> None:
    for i in range(n):
        try:
            settings.set(key, i)
        except Exception as exc:  # a lost write: counted, and the loop goes on
            errors.append(exc)


def _run(settings_a: Settings, settings_b: Settings, writes: int) -> list[BaseException]:
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_hammer, args=(s, key, errors, writes // 2))
               for s, key in ((settings_a, "a"), (settings_b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_two_threads_one_settings_lose_no_write(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "settings.json")
    errors = _run(settings, settings, WRITES)
    assert errors == [], f"{len(errors)} writes failed, first: {errors[0]!r}"
    on_disk = json.loads((tmp_path / "settings.json").read_text(encoding="utf-8"))
    assert on_disk["a"] == WRITES // 2 - 1 and on_disk["b"] == WRITES // 2 - 1
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]  # no temporary left


def test_two_settings_objects_on_one_file_keep_both_keys(tmp_path: Path) -> None:
    # Two Settings on one file stand for the GUI and a CLI command running side by side:
    # each must not write back the other's keys as they were when it started.
    path = tmp_path / "settings.json"
    errors = _run(Settings(path), Settings(path), 600)
    assert errors == [], f"{len(errors)} writes failed, first: {errors[0]!r}"
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    assert on_disk["a"] == 299 and on_disk["b"] == 299


def test_temporary_names_differ_per_thread_and_call(tmp_path: Path) -> None:
    from ragdesk.core.atomic import temp_name

    names: set[Path] = set()
    threads = [threading.Thread(target=lambda: names.update(temp_name(tmp_path / "f")
                                                            for _ in range(100)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(names) == 400
