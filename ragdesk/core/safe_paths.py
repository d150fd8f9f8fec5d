"""What a folder given to ragdesk may lead to: symbolic links that stay inside it, and file
names that are text.

A folder import or a ``models import --copy`` reads what the user pointed at and nothing
else: a link to ``/etc/passwd``, to ``/proc/self/environ`` (the importer's whole
environment) or to a file beside the folder would otherwise become passages or copies. One
check decides for both.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def link_problem(link: Path, allowed: Sequence[Path], what: str = "folder") -> str | None:
    """Why the symbolic link ``link`` must not be followed (completing "LINK is a symbolic
    link ..."), or None when it leads to something inside one of the ``allowed`` folders
    (resolved paths; the first is the ``what`` that messages name). Dangling links and
    loops are refused too."""
    try:
        target = link.resolve(strict=True)
    except FileNotFoundError:
        return f"to {shown_name(os.readlink(link))}, which does not exist"
    except (OSError, RuntimeError):  # ELOOP (RuntimeError before Python 3.13)
        return "that loops back on itself"
    if not any(target.is_relative_to(a) for a in allowed):
        return f"to {shown_name(str(target))}, outside the {what} {shown_name(str(allowed[0]))}"
    if target.is_dir() and link.parent.resolve().is_relative_to(target):
        return "to a folder that contains it (a loop)"  # following it would never end
    return None


def shown_name(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (kept by Python as U+DC80..U+DCFF)
    shown as ``\\xNN``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def is_text_name(name: str) -> bool:
    """Whether a name read from the disk is valid UTF-8 (it can be stored and shown)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
