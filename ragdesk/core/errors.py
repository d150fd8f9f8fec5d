"""A small taxonomy of errors with text written for users.

Every error a user can cause or fix derives from :class:`RagdeskError` and carries a
``message`` (what went wrong) and what to do about it, once per front end: ``hint`` is for
the command line (what to type), ``gui_hint`` for the desktop app (what to click), and
``action`` optionally names the one GUI action that fixes it (one of :data:`ACTIONS`), which
the app can offer as a button. The CLI prints ``message`` and ``hint`` and exits non-zero;
the GUI shows ``message`` and :meth:`RagdeskError.gui_text`. Anything that is not a
``RagdeskError`` is a bug.
"""

from __future__ import annotations

from pathlib import Path

# GUI actions an error can point at (ragdesk/ui maps them to menu actions).
ACTION_FIRST_RUN = "first-run"  # the welcome dialog: starter pack, paper packs, import
ACTION_MANAGE_INDEXES = "manage-indexes"  # Index ▸ Manage indexes…
ACTION_CHOOSE_PACK = "choose-pack"  # the model pack selector in the controls panel
ACTION_RETRY = "retry"  # ask again (the cause was transient)
ACTIONS = (ACTION_FIRST_RUN, ACTION_MANAGE_INDEXES, ACTION_CHOOSE_PACK, ACTION_RETRY)


class RagdeskError(Exception):
    """Base class of errors caused by the environment or by input, not by a bug."""

    exit_code = 1
    hint_default = ""
    # What the GUI says when the raiser gave no gui_hint: it must never name a command.
    gui_hint_default = ""
    action_default: str | None = None

    def __init__(self, message: str, hint: str | None = None, *, gui_hint: str | None = None,
                 action: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.hint_default
        self._gui_hint = gui_hint
        if action is not None and action not in ACTIONS:
            raise ValueError(f"unknown GUI action {action!r}")
        self.action = action if action is not None else self.action_default

    @property
    def gui_hint(self) -> str:
        """What to do, in the desktop app's words (menus and buttons, never commands)."""
        if self._gui_hint is not None:
            return self._gui_hint
        if self.hint and "`" not in self.hint and "--" not in self.hint:
            return self.hint  # a hint without a command reads the same in both front ends
        return self.gui_hint_default

    def user_text(self) -> str:
        return f"{self.message}\n{self.hint}" if self.hint else self.message

    def gui_text(self) -> str:
        return f"{self.message}\n{self.gui_hint}" if self.gui_hint else self.message


class DataDirError(RagdeskError):
    hint_default = "Choose a writable folder with --data-dir DIR or the RAGDESK_DATA_DIR variable."
    gui_hint_default = ("Start ragdesk with a writable data folder (the RAGDESK_DATA_DIR "
                        "environment variable).")


class CatalogError(RagdeskError):
    hint_default = (
        "Move the file aside (ragdesk keeps your snapshots) and start again; "
        "ragdesk will create a new catalog."
    )


class CatalogBusyError(CatalogError):
    hint_default = "Another ragdesk process is writing to this data directory; try again shortly."
    action_default = ACTION_RETRY


class NotFoundError(RagdeskError):
    hint_default = "Run `ragdesk index list` or `ragdesk models list` to see what exists."
    gui_hint_default = "Open Index ▸ Manage indexes… to see the snapshots that exist."
    action_default = ACTION_MANAGE_INDEXES


class AlreadyExistsError(RagdeskError):
    hint_default = "Pick another name, or remove the existing one first."


class BadInputError(RagdeskError):
    """Input data that cannot be read; names the file and, where known, the line."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        line: int | None = None,
        hint: str | None = None,
        gui_hint: str | None = None,
    ) -> None:
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f", line {line}"
            where += ": "
        super().__init__(where + message, hint, gui_hint=gui_hint)
        self.path = Path(path) if path is not None else None
        self.line = line


class MissingModelError(RagdeskError):
    hint_default = (
        "Check the model id or folder; `ragdesk models list` shows installed packs and "
        "`ragdesk models import PATH --name NAME` registers a local folder."
    )
    gui_hint_default = ("Choose an installed model pack in the controls panel, or set up the "
                        "offline starter pack from the welcome dialog (Help ▸ Get started…).")
    action_default = ACTION_CHOOSE_PACK


class EncoderMismatchError(RagdeskError):
    hint_default = "Use the model pack whose passage encoder built this snapshot, or re-import it."


class CorruptSnapshotError(RagdeskError):
    hint_default = "Run `ragdesk index verify NAME`; remove the snapshot and import it again."
    gui_hint_default = ("Open Index ▸ Manage indexes…, select the snapshot and click Verify; "
                        "if it fails, remove it and import it again.")
    action_default = ACTION_MANAGE_INDEXES


class UnfinishedImportError(RagdeskError):
    """A snapshot whose import stopped before the end and can be resumed: not damaged."""

    hint_default = ("Run the same `ragdesk index import` command again to resume it from its "
                    "last committed batch, or remove it with `ragdesk index remove NAME`.")
    gui_hint_default = ("Import the same source under the same name again to resume it, or "
                        "remove it in Index ▸ Manage indexes….")
    action_default = ACTION_MANAGE_INDEXES


class DiskFullError(RagdeskError):
    hint_default = "Free some disk space (or choose another --data-dir) and try again."


class OfflineError(RagdeskError):
    hint_default = (
        "ragdesk cannot reach the Hugging Face hub. Copy the model folders here and run "
        "`ragdesk models import PATH --name NAME`, or use the offline starter pack."
    )
    gui_hint_default = ("ragdesk cannot reach the Hugging Face hub. Choose the offline starter "
                        "pack in the welcome dialog (Help ▸ Get started…) instead.")
    action_default = ACTION_FIRST_RUN


class NoSnapshotError(NotFoundError):
    """Nothing to answer from yet: no snapshot is active (or none exists)."""

    hint_default = ("Set up the offline starter pack with `ragdesk models setup-starter`, "
                    "import a snapshot with `ragdesk index import`, or pick one with "
                    "`ragdesk index switch NAME`.")
    gui_hint_default = ("Click Start in the welcome dialog (Help ▸ Get started…) to set up "
                        "the offline starter pack, or pick a snapshot in the Index menu.")
    action_default = ACTION_FIRST_RUN


class DensePendingError(RagdeskError):
    """The snapshot answers with BM25 while its dense vectors are still being computed."""

    hint_default = "Ask with `--retriever sparse` (BM25) until the import has finished."
    gui_hint_default = ("Its answers use BM25 until then; dense and hybrid retrieval switch "
                        "on by themselves when the vectors are done.")


class Cancelled(RagdeskError):
    """Raised inside long work when the user cancelled it; not an error to report loudly."""

    hint_default = ""


def is_disk_full(exc: BaseException) -> bool:
    """A write that ran out of room: a full disk or quota, the file-size limit (``ulimit
    -f``: EFBIG), or SQLite saying so (it reports the file-size limit as a "disk I/O
    error", which is taken for it only while such a limit is set)."""
    import errno

    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    msg = str(exc)
    return "disk is full" in msg or ("disk I/O error" in msg and file_size_limit() is not None)


def file_size_limit() -> int | None:
    """The largest file this process may write, in bytes (None: no limit is set)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def disk_full_message(path: object) -> str:
    """What ran out while writing ``path``: the disk, or the file-size limit."""
    limit = file_size_limit()
    if limit is not None:
        return (f"Writing {path} ran out of room: the disk is full or the file-size limit "
                f"(`ulimit -f`, {limit:,} bytes) was reached.")
    return f"The disk is full while writing {path}."
