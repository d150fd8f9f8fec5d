"""MediaWiki markup to plain prose, with a real wikitext parser (mwparserfromhell).

``strip_code`` alone keeps footnote text, image captions ("thumb|right|..."), category and
interlanguage links and table cells; those are removed first so that passages read like the
article's prose, as DPR's Wikipedia passages do.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mwparserfromhell.nodes import Node
    from mwparserfromhell.wikicode import Wikicode

# Tags whose content is not prose (footnotes, tables, formulas, galleries, ...).
DROP_TAGS = frozenset({
    "ref", "references", "table", "math", "chem", "ce", "gallery", "timeline", "score",
    "syntaxhighlight", "source", "pre", "imagemap", "graph", "mapframe", "templatedata",
    "noinclude", "includeonly",
})
# Link prefixes that are not article links: media, categories, interlanguage links.
NON_ARTICLE_LINK = re.compile(
    r"^\s*:?\s*(file|image|media|category|[a-z]{2,3}(-[a-z]{2,8})?|simple)\s*:", re.IGNORECASE
)
_SPACE = re.compile(r"\s+")


def _remove(code: Wikicode, node: Node) -> None:
    with contextlib.suppress(ValueError):  # already gone with an enclosing node
        code.remove(node)


def wikitext_to_text(wikitext: str) -> str:
    """Plain text of an article body: prose only, whitespace collapsed to single spaces."""
    import mwparserfromhell

    code = mwparserfromhell.parse(wikitext)
    for tag in code.filter_tags(recursive=True):
        if str(tag.tag).strip().lower() in DROP_TAGS:
            _remove(code, tag)
    for link in code.filter_wikilinks(recursive=True):
        if NON_ARTICLE_LINK.match(str(link.title)):
            _remove(code, link)
    for heading in code.filter_headings(recursive=False):
        _remove(code, heading)
    text = code.strip_code(normalize=True, collapse=True)
    return _SPACE.sub(" ", text).strip()
