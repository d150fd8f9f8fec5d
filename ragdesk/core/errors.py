"""A small taxonomy of errors with text written for users.

Every error a user can cause or fix derives from :class:`RagdeskError` and carries a
``message`` (what went wrong) and what to do about it. ``hint`` says it with commands (what
to type); ``gui_hint`` without any, in words that name the fix by its action (one of
:data:`ACTIONS`, by its name in :data:`ACTION_NAMES`), which a front end with buttons offers
as one (``action``). Which of the two each front end shows is decided here, once
(:meth:`RagdeskError.hint_for`): the command line and the local server's clients get the
commands, the desktop app the words without them. Anything that is not a ``RagdeskError``
is a bug.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

# The actions an error can point at: a front end offers each as it can (the desktop app as
# a button that opens the dialog or control it names).
ACTION_FIRST_RUN = "first-run"  # getting started: starter pack, paper packs, import
ACTION_MANAGE_INDEXES = "manage-indexes"  # the snapshots: list, verify, remove, import
ACTION_CHOOSE_PACK = "choose-pack"  # the model pack that answers
ACTION_RETRY = "retry"  # ask again (the cause was transient)
ACTIONS = (ACTION_FIRST_RUN, ACTION_MANAGE_INDEXES, ACTION_CHOOSE_PACK, ACTION_RETRY)
# What a hint without commands calls each action; the words a button offering it shows.
ACTION_NAMES = {ACTION_FIRST_RUN: "Get started", ACTION_MANAGE_INDEXES: "Manage indexes",
                ACTION_CHOOSE_PACK: "Choose a model pack", ACTION_RETRY: "Try again"}
_START, _INDEXES = ACTION_NAMES[ACTION_FIRST_RUN], ACTION_NAMES[ACTION_MANAGE_INDEXES]

FrontEnd = Literal["cli", "gui", "server"]


class RagdeskError(Exception):
    """Base class of errors caused by the environment or by input, not by a bug."""

    exit_code = 1
    hint_default = ""
    # The hint without commands when the raiser gave none: it must never name a command.
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
        """What to do without typing a command (the fix named by its action, never a
        command)."""
        if self._gui_hint is not None:
            return self._gui_hint
        if self.hint and "`" not in self.hint and "--" not in self.hint:
            return self.hint  # a hint without a command reads the same in every front end
        return self.gui_hint_default

    def hint_for(self, front_end: FrontEnd) -> str:
        """What to do, as ``front_end`` shows it: commands on the command line and to the
        local server's clients (its machine has ragdesk's commands), none in the desktop
        app."""
        return self.gui_hint if front_end == "gui" else self.hint

    def text_for(self, front_end: FrontEnd, sep: str = "\n") -> str:
        """The message and, after ``sep``, what to do, as ``front_end`` shows them."""
        hint = self.hint_for(front_end)
        return f"{self.message}{sep}{hint}" if hint else self.message

    def user_text(self) -> str:
        return self.text_for("cli")

    def gui_text(self) -> str:
        return self.text_for("gui")


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
    gui_hint_default = f"{_INDEXES} shows the snapshots that exist."
    action_default = ACTION_MANAGE_INDEXES


class NoSuchSnapshotError(NotFoundError):
    """A snapshot asked for by a name the catalog does not hold."""

    exit_code = 2  # a name typed that names nothing: bad input, as a bad option value is

    hint_default = "Run `ragdesk index list` to see the snapshots there are."


class NoSuchPackError(NotFoundError):
    """A model pack asked for by a name no pack has."""

    exit_code = 2

    hint_default = "Run `ragdesk models list` to see the model packs there are."
    gui_hint_default = f"{ACTION_NAMES[ACTION_CHOOSE_PACK]} lists the packs there are."
    action_default = ACTION_CHOOSE_PACK


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
    gui_hint_default = (f"{ACTION_NAMES[ACTION_CHOOSE_PACK]} that is installed, or set up "
                        f"the offline starter pack ({_START}).")
    action_default = ACTION_CHOOSE_PACK


class EncoderMismatchError(RagdeskError):
    hint_default = "Use the model pack whose passage encoder built this snapshot, or re-import it."


class CorruptSnapshotError(RagdeskError):
    hint_default = "Run `ragdesk index verify NAME`; remove the snapshot and import it again."
    gui_hint_default = (f"Verify the snapshot ({_INDEXES}); if it fails, remove it and "
                        "import it again.")
    action_default = ACTION_MANAGE_INDEXES


class UnfinishedImportError(RagdeskError):
    """A snapshot whose import stopped before the end and can be resumed: not damaged."""

    hint_default = ("Run the same `ragdesk index import` command again to resume it from its "
                    "last committed batch, or remove it with `ragdesk index remove NAME`.")
    gui_hint_default = ("Import the same source under the same name again to resume it, or "
                        f"remove it ({_INDEXES}).")
    action_default = ACTION_MANAGE_INDEXES


class DiskFullError(RagdeskError):
    hint_default = "Free some disk space (or choose another --data-dir) and try again."


class SnapshotBusyError(RagdeskError):
    """A finished snapshot folder could not be renamed into place (Windows refuses to move a
    folder whose files are open); the work is kept, so running the import again resumes."""

    hint_default = ("Close what reads the snapshot and run the same import again; the "
                    "finished work is kept, so it only moves it into place.")


class OfflineError(RagdeskError):
    hint_default = (
        "ragdesk cannot reach the Hugging Face hub. Copy the model folders here and run "
        "`ragdesk models import PATH --name NAME`, or use the offline starter pack."
    )
    gui_hint_default = ("ragdesk cannot reach the Hugging Face hub. Set up the offline "
                        f"starter pack instead ({_START}).")
    action_default = ACTION_FIRST_RUN


class NoSnapshotError(NotFoundError):
    """Nothing to answer from yet: no snapshot is active (or none exists)."""

    hint_default = ("Set up the offline starter pack with `ragdesk models setup-starter`, "
                    "import a snapshot with `ragdesk index import`, or pick one with "
                    "`ragdesk index switch NAME`.")
    gui_hint_default = (f"Set up the offline starter pack ({_START}), or pick a snapshot to "
                        f"answer from ({_INDEXES}).")
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
