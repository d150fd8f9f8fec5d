"""What the parsers hand to the splitter, and what a passage remembers of its place."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ragdesk.core.errors import RagdeskError


@dataclass(frozen=True)
class Block:
    """One paragraph-like run of text and where it sits: a PDF page, the nearest heading."""

    text: str
    page: int | None = None  # 1-based physical page (what a viewer's #page=N means)
    heading: str | None = None
    anchor: str | None = None  # an HTML id the heading carries, to open the file there
    is_heading: bool = False


@dataclass
class ParsedDocument:
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass(frozen=True)
class Location:
    """Where a passage came from, stored with it so a citation can open the file there."""

    path: str  # relative to the imported folder, with forward slashes
    page: int | None = None
    heading: str | None = None
    anchor: str | None = None

    def to_json(self) -> str:
        d: dict[str, object] = {"path": self.path}
        for key in ("page", "heading", "anchor"):
            value = getattr(self, key)
            if value is not None:
                d[key] = value
        return json.dumps(d, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, raw: str) -> Location | None:
        """None for rows that are not document locations (other formats' source ids)."""
        try:
            d = json.loads(raw)
        except (TypeError, ValueError):
            return None
        if not isinstance(d, dict) or not isinstance(d.get("path"), str):
            return None
        page = d.get("page")
        heading = d.get("heading")
        anchor = d.get("anchor")
        return cls(d["path"], page if isinstance(page, int) else None,
                   heading if isinstance(heading, str) else None,
                   anchor if isinstance(anchor, str) else None)


@dataclass(frozen=True)
class DocPassage:
    title: str
    text: str
    location: Location


class DocumentError(RagdeskError):
    """A file that cannot be read; the import reports it by name and goes on. The message
    is what is wrong with the file ("is encrypted; ..."), shown after its name."""
