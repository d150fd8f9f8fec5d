"""A folder of the user's documents (PDF, DOCX, Markdown, HTML, plain text) as a snapshot.

Files are parsed along their structure (pages, headings), split into passages of about 100
words that never span two pages or sections, and imported with each passage's place
(:class:`Location`: file, page, heading) stored beside it, so a citation can open the file
there. Re-importing the folder encodes only new and changed files.
"""

from ragdesk.core.documents.assemble import DOCS_FORMAT
from ragdesk.core.documents.citations import (
    citation_uri,
    citation_uris,
    document_root,
    locate,
    locate_in_folder,
)
from ragdesk.core.documents.folder import DOCUMENTS_FILE, read_folder_record
from ragdesk.core.documents.importer import FolderImportResult, import_folder
from ragdesk.core.documents.model import Location
from ragdesk.core.documents.parsers import SUFFIXES, parse_file
from ragdesk.core.documents.splitting import split_document

__all__ = [
    "DOCS_FORMAT",
    "DOCUMENTS_FILE",
    "SUFFIXES",
    "FolderImportResult",
    "Location",
    "citation_uri",
    "citation_uris",
    "document_root",
    "import_folder",
    "locate",
    "locate_in_folder",
    "parse_file",
    "read_folder_record",
    "split_document",
]
