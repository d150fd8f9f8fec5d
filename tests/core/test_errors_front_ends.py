"""Errors speak to the front end that shows them: the CLI says what to type, the GUI what to
click (and which action fixes it)."""

from __future__ import annotations

import pytest

from ragdesk.core import errors
from ragdesk.core.errors import (
    ACTIONS,
    CorruptSnapshotError,
    MissingModelError,
    NoSnapshotError,
    NotFoundError,
    RagdeskError,
)

CLI_HINT = "Run `ragdesk index import vital-articles --name starter` first."


def _all_error_classes() -> list[type[RagdeskError]]:
    out = []
    for obj in vars(errors).values():
        if isinstance(obj, type) and issubclass(obj, RagdeskError) and obj is not RagdeskError:
            out.append(obj)
    return out


@pytest.mark.parametrize("cls", _all_error_classes(), ids=lambda c: c.__name__)
def test_no_gui_text_names_a_command(cls: type[RagdeskError]) -> None:
    exc = cls("Something failed.") if cls is not errors.BadInputError else cls("bad")
    for text in (exc.gui_hint, exc.gui_text()):
        assert "`" not in text and " --" not in text, cls  # commands are quoted or flagged
    assert exc.action is None or exc.action in ACTIONS


def test_a_command_hint_is_kept_for_the_cli_and_replaced_for_the_gui() -> None:
    exc = NotFoundError("No snapshot named 'x'.", CLI_HINT)
    assert exc.hint == CLI_HINT and CLI_HINT in exc.user_text()
    assert exc.gui_hint == NotFoundError.gui_hint_default
    assert "Manage indexes" in exc.gui_hint and exc.action == "manage-indexes"


def test_a_plain_hint_serves_both_and_an_explicit_gui_hint_wins() -> None:
    plain = CorruptSnapshotError("Broken.", "Free some space and try again.")
    assert plain.gui_hint == "Free some space and try again."
    both = MissingModelError("No generator.", CLI_HINT, gui_hint="Click Start.",
                             action="first-run")
    assert (both.hint, both.gui_hint, both.action) == (CLI_HINT, "Click Start.", "first-run")
    with pytest.raises(ValueError):
        RagdeskError("x", action="launch-missiles")


def test_the_gui_error_report_uses_the_gui_words() -> None:
    from ragdesk.ui.reports import ErrorReport

    report = ErrorReport.from_exception(NoSnapshotError("No snapshot is active."))
    assert report.message == "No snapshot is active."
    assert "setup-starter" not in report.hint and "Get started" in report.hint
    assert report.action == "first-run" and not report.is_bug


def test_each_front_end_gets_its_hint_from_one_rule() -> None:
    exc = NotFoundError("No snapshot named 'x'.", CLI_HINT)
    assert exc.hint_for("cli") == exc.hint_for("server") == CLI_HINT
    assert exc.hint_for("gui") == exc.gui_hint
    assert exc.text_for("server", sep=" ") == f"No snapshot named 'x'. {CLI_HINT}"
    assert exc.text_for("cli") == exc.user_text() and exc.text_for("gui") == exc.gui_text()


@pytest.mark.parametrize("cls", _all_error_classes(), ids=lambda c: c.__name__)
def test_hints_without_commands_name_no_menu_or_widget(cls: type[RagdeskError]) -> None:
    """They name the fix by its action (errors.ACTION_NAMES), whichever front end shows
    them, never where the desktop app happens to keep it."""
    exc = cls("Something failed.") if cls is not errors.BadInputError else cls("bad")
    for word in ("▸", "menu", "dialog", "panel", "click", "Click"):
        assert word not in exc.gui_hint, (cls, word)
    if exc.action is not None and exc.action != errors.ACTION_RETRY:
        assert errors.ACTION_NAMES[exc.action] in exc.gui_hint, cls
