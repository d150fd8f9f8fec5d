"""The import frame's one failure rule, which both importers (passage sources and folders of
documents) follow."""

from __future__ import annotations

import errno
import os

import pytest

from ragdesk.core.errors import BadInputError, Cancelled, DiskFullError, SnapshotBusyError
from ragdesk.core.snapshots.import_job import classify_failure

AGAIN = "run it again"


@pytest.mark.parametrize("exc", [
    Cancelled("stop"), KeyboardInterrupt(), SnapshotBusyError("busy"),
    DiskFullError("The disk is full."), OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)),
])
def test_resumable_failures_keep_the_work(exc: BaseException) -> None:
    assert classify_failure(exc, AGAIN).resumable


@pytest.mark.parametrize("exc", [
    OSError(errno.EIO, os.strerror(errno.EIO)), PermissionError(13, "denied"),
    BadInputError("is broken.", path="x.jsonl"), RuntimeError("a bug"),
])
def test_other_failures_discard_it(exc: BaseException) -> None:
    failure = classify_failure(exc, AGAIN)
    assert not failure.resumable and failure.job_state == "failed"
    assert "to resume" not in failure.message


def test_the_messages_say_how_to_resume() -> None:
    full = classify_failure(OSError(errno.ENOSPC, "No space left on device"), AGAIN)
    assert full.message.endswith("Free some space and run it again to resume.")
    stopped = classify_failure(Cancelled("stop"), AGAIN)
    assert (stopped.message, stopped.job_state) == ("Cancelled; run it again to resume.",
                                                    "cancelled")
    assert classify_failure(RuntimeError("boom"), AGAIN).message == "RuntimeError: boom"
