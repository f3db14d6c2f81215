"""HTML: the main text of the page (trafilatura drops navigation, headers, footers and ads),
as Markdown so that headings still give the chunks their structure.
"""

from __future__ import annotations

from pathlib import Path

import trafilatura

from indexing.readers.common import document
from service.ingest.documents import SourceDoc


def read_html(path: Path, doc_id: str) -> SourceDoc:
    raw = path.read_bytes()
    text = trafilatura.extract(
        raw,
        output_format="markdown",
        include_comments=False,
        include_tables=True,
        include_links=False,
        include_images=False,
        favor_recall=True,
        with_metadata=False,
    )
    meta = trafilatura.extract_metadata(raw)
    title = (meta.title if meta is not None else None) or ""
    lang = (meta.language if meta is not None else None) or ""
    return document(
        path, doc_id, text or "", title=title, markdown=True, lang=lang[:2].lower(), anchors=True
    )
