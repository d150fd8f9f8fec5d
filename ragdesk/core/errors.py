"""A small taxonomy of errors with text written for users.

Every error a user can cause or fix derives from :class:`RagdeskError` and carries a
``message`` (what went wrong) and a ``hint`` (what to do). The CLI prints both and exits
non-zero; the GUI shows them in a dialog. Anything that is not a ``RagdeskError`` is a bug.
"""

from __future__ import annotations

from pathlib import Path


class RagdeskError(Exception):
    """Base class of errors caused by the environment or by input, not by a bug."""

    exit_code = 1
    hint_default = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.hint_default

    def user_text(self) -> str:
        return f"{self.message}\n{self.hint}" if self.hint else self.message


class DataDirError(RagdeskError):
    hint_default = "Choose a writable folder with --data-dir DIR or the RAGDESK_DATA_DIR variable."


class CatalogError(RagdeskError):
    hint_default = (
        "Move the file aside (ragdesk keeps your snapshots) and start again; "
        "ragdesk will create a new catalog."
    )


class CatalogBusyError(CatalogError):
    hint_default = "Another ragdesk process is writing to this data directory; try again shortly."


class NotFoundError(RagdeskError):
    hint_default = "Run `ragdesk index list` or `ragdesk models list` to see what exists."


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
    ) -> None:
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f", line {line}"
            where += ": "
        super().__init__(where + message, hint)
        self.path = Path(path) if path is not None else None
        self.line = line


class MissingModelError(RagdeskError):
    hint_default = (
        "Check the model id or folder; `ragdesk models list` shows installed packs and "
        "`ragdesk models import PATH --name NAME` registers a local folder."
    )


class EncoderMismatchError(RagdeskError):
    hint_default = "Use the model pack whose passage encoder built this snapshot, or re-import it."


class CorruptSnapshotError(RagdeskError):
    hint_default = "Run `ragdesk index verify NAME`; remove the snapshot and import it again."


class DiskFullError(RagdeskError):
    hint_default = "Free some disk space (or choose another --data-dir) and try again."


class OfflineError(RagdeskError):
    hint_default = (
        "ragdesk cannot reach the Hugging Face hub. Copy the model folders here and run "
        "`ragdesk models import PATH --name NAME`, or use the offline starter pack."
    )


class Cancelled(RagdeskError):
    """Raised inside long work when the user cancelled it; not an error to report loudly."""

    hint_default = ""


def is_disk_full(exc: BaseException) -> bool:
    import errno

    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
