"""``models import --copy`` destroyed data or left it in the way.

- ``--copy --replace`` from the pack's own copy deleted that copy, then registered paths
  that no longer existed (exit 0, "Registered", pack "not installed");
- on a full disk the old files were deleted before the new copy succeeded;
- ``--copy`` followed symbolic links out of the model folder (``/etc/shadow`` was copied),
  and dangling links and link loops ended in internal errors;
- a kill mid-copy left a hidden folder that blocked the re-run.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragdesk.cli.main import EXIT_BUG


def _packs(cli) -> dict[str, dict]:  # type: ignore[no-untyped-def,type-arg]
    code, out, err = cli("models", "list", "--json")
    assert code == 0, err
    return {p["name"]: p for p in json.loads(out)}


def _hidden(models_dir: Path) -> list[str]:
    # The per-name lock files stay (they are how a live import is told apart); nothing else.
    return sorted(p.name for p in models_dir.iterdir()
                  if p.name.startswith(".") and not p.name.endswith(".lock"))


@pytest.fixture()
def imported(cli, tiny_models, tmp_path: Path, data_dir: Path) -> Path:  # type: ignore[no-untyped-def]
    """A pack 'p' imported with --copy; returns its copy folder."""
    src = tmp_path / "rag"
    shutil.copytree(tiny_models.rag_sequence, src)
    code, _, err = cli("models", "import", str(src), "--name", "p", "--copy")
    assert code == 0, err
    dest = data_dir / "models" / "p" / "rag"
    assert dest.is_dir() and _packs(cli)["p"]["installed"]
    return dest


def _assert_pack_intact(cli, copy: Path) -> None:  # type: ignore[no-untyped-def]
    pack = _packs(cli)["p"]
    assert pack["installed"], pack
    assert pack["question_encoder"] == str(copy)
    assert (copy / "config.json").is_file()
    assert _hidden(copy.parent.parent) == []


def test_replace_from_its_own_copy_is_refused(cli, imported: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("models", "import", str(imported), "--name", "p", "--copy",
                         "--replace")
    assert code == 2, (out, err)
    assert "would delete its own source" in err and str(imported) in err
    assert "without --copy" in err  # what to do instead
    _assert_pack_intact(cli, imported)


def test_full_disk_during_replace_keeps_the_old_copy(cli, imported: Path, tiny_models,  # type: ignore[no-untyped-def]
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.copyfile
    calls = [0]

    def copyfile(src, dst, *a, **kw):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] > 2:  # a few files fit, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(shutil, "copyfile", copyfile)
    code, out, err = cli("models", "import", str(tiny_models.rag_sequence), "--name", "p",
                         "--copy", "--replace")
    monkeypatch.setattr(shutil, "copyfile", real)
    assert code == 1, (out, err)
    assert "disk filled up" in err and "nothing was changed" in err
    assert "Free some disk space" in err
    _assert_pack_intact(cli, imported)


def _model_with_link(tiny_models, tmp_path: Path, target: str) -> Path:  # type: ignore[no-untyped-def]
    src = tmp_path / "linked"
    shutil.copytree(tiny_models.rag_sequence, src)
    os.symlink(target, src / "extra")
    return src


@pytest.mark.parametrize("kind", ["outside", "dangling", "loop", "parent"])
def test_links_the_copy_must_not_follow(cli, tiny_models, tmp_path: Path, data_dir: Path,  # type: ignore[no-untyped-def]
                                        kind: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of any model")
    target = {"outside": str(secret), "dangling": str(tmp_path / "gone"),
              "loop": "extra", "parent": "."}[kind]
    src = _model_with_link(tiny_models, tmp_path, target)
    code, out, err = cli("models", "import", str(src), "--name", "linked", "--copy")
    assert code == 2, (out, err)
    assert code != EXIT_BUG and "internal error" not in err
    assert f"{src / 'extra'} is a symbolic link" in err
    assert {"outside": "outside the model folder", "dangling": "does not exist",
            "loop": "loops back", "parent": "contains it"}[kind] in err
    assert "linked" not in _packs(cli)
    models = data_dir / "models"
    assert not models.exists() or not [p for p in models.iterdir()
                                       if not p.name.endswith(".lock")]
    assert not list(data_dir.rglob("secret.txt"))


def test_a_link_inside_the_folder_is_copied_as_its_target(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                          data_dir: Path) -> None:
    src = tmp_path / "linked"
    shutil.copytree(tiny_models.rag_sequence, src)
    (src / "README.md").write_text("notes")
    os.symlink("README.md", src / "extra")
    code, _, err = cli("models", "import", str(src), "--name", "linked", "--copy")
    assert code == 0, err
    copied = data_dir / "models" / "linked" / "linked" / "extra"
    assert not copied.is_symlink() and copied.read_text() == "notes"


def test_kill_mid_copy_does_not_block_the_rerun(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                data_dir: Path) -> None:
    src = tmp_path / "rag"
    shutil.copytree(tiny_models.rag_sequence, src)
    # Each file copy takes a second, so the kill lands in the middle of the copy.
    script = (
        "import shutil, sys, time\n"
        "real = shutil.copyfile\n"
        "def slow(*a, **k):\n"
        "    time.sleep(1.0)\n"
        "    return real(*a, **k)\n"
        "shutil.copyfile = slow\n"
        "from ragdesk.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.Popen([sys.executable, "-c", script, "--data-dir", str(data_dir),
                             "models", "import", str(src), "--name", "p", "--copy"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    models = data_dir / "models"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        # A half copy: a hidden folder (wherever the code puts it) with a file copied.
        staging = [p for p in models.rglob(".*") if p.is_dir()] if models.exists() else []
        if any(any(p.rglob("*.json")) for p in staging):
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert [p for p in models.rglob(".*") if p.is_dir()]  # a half copy was left behind ...

    code, out, err = cli("models", "import", str(src), "--name", "p", "--copy")
    assert code == 0, (out, err)  # ... which does not stand in the way
    _assert_pack_intact(cli, data_dir / "models" / "p" / "rag")
