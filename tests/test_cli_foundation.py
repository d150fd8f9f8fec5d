from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from ragdesk import __version__
from ragdesk.cli.main import build_parser
from tests.conftest import run_cli_subprocess


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.cli.main import main

    with pytest.raises(SystemExit) as ex:
        main(["--version"])
    assert ex.value.code == 0
    assert capsys.readouterr().out.strip() == f"ragdesk {__version__}"
    with pytest.raises(SystemExit) as ex:
        main(["--help"])
    assert ex.value.code == 0
    assert "index" in capsys.readouterr().out


def _all_subcommand_paths() -> list[list[str]]:
    import argparse

    paths: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    paths.append([*prefix, name])
                    walk(sub, [*prefix, name])

    walk(build_parser(), [])
    return paths


@pytest.mark.parametrize("path", _all_subcommand_paths(), ids=" ".join)
def test_every_subcommand_has_help(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.cli.main import main

    with pytest.raises(SystemExit) as ex:
        main([*path, "--help"])
    assert ex.value.code == 0
    assert "usage: ragdesk" in capsys.readouterr().out


def test_expected_subcommands_exist() -> None:
    top = {p[0] for p in _all_subcommand_paths()}
    assert {"index", "models", "ask", "eval", "gui"} <= top


def test_index_list_json_on_empty_dir_creates_catalog_there_only(tmp_path: Path) -> None:
    d = tmp_path / "D"
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_DATA_HOME": str(home / "xdg"),
           "XDG_CONFIG_HOME": str(home / "cfg"), "XDG_CACHE_HOME": str(home / "cache")}
    env.pop("RAGDESK_DATA_DIR", None)
    res = run_cli_subprocess("--data-dir", str(d), "index", "list", "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == []
    assert (d / "catalog.sqlite").is_file()
    assert list(home.rglob("*")) == [] or not any(
        "ragdesk" in str(p) for p in home.rglob("*")), list(home.rglob("*"))


def test_env_var_relocates_data_dir(tmp_path: Path) -> None:
    d = tmp_path / "from-env"
    res = run_cli_subprocess("index", "list", "--json", env={"RAGDESK_DATA_DIR": str(d)})
    assert res.returncode == 0, res.stderr
    assert (d / "catalog.sqlite").is_file() and (d / "logs" / "ragdesk.log").is_file()


def test_unknown_subcommand_is_a_clean_error(tmp_path: Path) -> None:
    res = run_cli_subprocess("--data-dir", str(tmp_path), "frobnicate")
    assert res.returncode == 2
    assert "invalid choice" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0,
                    reason="root ignores permission bits")
def test_unwritable_data_dir_non_root(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    res = run_cli_subprocess("--data-dir", str(ro / "d"), "index", "list")
    assert res.returncode != 0 and "cannot be used" in res.stderr
    assert "Traceback" not in res.stderr


def test_unusable_data_dir_is_a_clean_error(tmp_path: Path) -> None:
    # A regular file where the data directory should be: fails for root too.
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    res = run_cli_subprocess("--data-dir", str(blocker / "d"), "index", "list")
    assert res.returncode != 0
    assert "cannot be used" in res.stderr and "--data-dir" in res.stderr
    assert "Traceback" not in res.stderr


def test_catalog_that_is_not_sqlite_is_a_clean_error(tmp_path: Path) -> None:
    tmp_path.joinpath("catalog.sqlite").write_bytes(b"\x00\x01garbage" * 100)
    res = run_cli_subprocess("--data-dir", str(tmp_path), "index", "list")
    assert res.returncode != 0
    assert "not an SQLite database" in res.stderr and "Traceback" not in res.stderr


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    res = run_cli_subprocess("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"ragdesk {__version__}"


def test_verbose_logs_to_stderr(tmp_path: Path) -> None:
    res = run_cli_subprocess("--data-dir", str(tmp_path), "-vv", "index", "list")
    assert res.returncode == 0
    assert "ragdesk" in res.stderr and "DEBUG" in res.stderr


# the tests' own HF_HUB_DISABLE_PROGRESS_BARS keeps huggingface_hub's switch off (it says so
# when asked to turn it on); transformers' own, which this checks, still follows
@pytest.mark.filterwarnings("ignore:Cannot enable progress bars")
def test_the_libraries_progress_bars_are_off_in_every_command_but_verbose(
        data_dir: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers draws "Loading weights" on stderr for each model it loads (training
    loads the generator through it), past ragdesk's progress line and --json's quiet
    stderr: every command, the window included, runs with them off unless -v."""
    from transformers.utils import logging as hf_logging

    from ragdesk.cli import main as cli_main

    def bar() -> str:
        for _ in hf_logging.tqdm(range(3), desc="Loading weights"):
            pass
        return capsys.readouterr().err

    seen: list[tuple[bool, str]] = []

    def window(args: object, ctx: object) -> int:  # what `ragdesk` alone runs
        seen.append((hf_logging.is_progress_bar_enabled(), bar()))
        return 0

    monkeypatch.setattr(cli_main, "_run_gui", window)
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()  # as a user's process starts
    try:
        assert "Loading weights" in bar()
        assert cli_main.main(["--data-dir", str(data_dir)]) == 0
        assert cli_main.main(["--data-dir", str(data_dir), "-v"]) == 0
        assert hf_logging.is_progress_bar_enabled()  # as it was, after each command
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()
    assert seen[0] == (False, "") and seen[1][0] and "Loading weights" in seen[1][1]


def test_a_cancelled_training_job_says_that_running_it_again_resumes(
        data_dir: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.cli import main as cli_main
    from ragdesk.cli.train_cmd import RESUME_HINT, checkpoint_on_ctrl_c

    def job(args: object, ctx: object) -> int:
        with checkpoint_on_ctrl_c() as token:
            token.cancel()  # as the first Ctrl-C does
            token.raise_if_cancelled()
        return 0

    monkeypatch.setattr(cli_main, "_run_gui", job)
    assert cli_main.main(["--data-dir", str(data_dir)]) == 130
    assert capsys.readouterr().err.strip() == f"ragdesk: cancelled. {RESUME_HINT}"


def test_the_bars_switch_is_put_back_when_transformers_comes_in_within_it() -> None:
    """transformers copies huggingface_hub's switch when first imported: imported within
    the block, it copied "off", and after the block its bars must be on again."""
    import subprocess

    code = ("from ragdesk.core.hf_progress import hf_progress_bars\n"
            "import sys\n"
            "with hf_progress_bars(shown=False):\n"
            "    from transformers.utils import logging as hf\n"
            "    inside = hf.is_progress_bar_enabled()\n"
            "print(inside, hf.is_progress_bar_enabled())\n")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout.split()
    assert out == ["False", "True"]
