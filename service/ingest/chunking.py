"""Structure-following chunking that fits the embedder's token limit.

Markdown is cut at headings first (each chunk keeps its heading path), then at paragraphs, then
at sentences; pieces are packed up to `target` model tokens with one sentence of overlap. No
chunk exceeds `max_tokens` (all-MiniLM-L6-v2 silently truncates past 256 word pieces): an
over-long sentence is cut by words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec
import regex
from markdown_it import MarkdownIt

from service.text.markdown import blocks, is_block, strip_directives
from service.text.sentences import split_sentences

CountTokens = Callable[[Sequence[str]], list[int]]
SECTION_SEPARATOR = " › "
"""Between a chunk's page title and the headings above it, in its title."""
_ANCHOR = regex.compile(r"\s*\{\s*#[^}]*\}\s*$")


def strip_anchor(heading: str) -> str:
    """`Features { #features }` -> `Features` (MkDocs heading anchors)."""
    return _ANCHOR.sub("", heading).strip()


class ChunkText(msgspec.Struct, kw_only=True):
    text: str
    headings: list[str]

    def title(self, doc_title: str) -> str:
        path = [h for h in self.headings if h and h != doc_title]
        return SECTION_SEPARATOR.join([doc_title, *path]) if path else doc_title

    def embed_text(self, doc_title: str) -> str:
        """What gets embedded: the heading path gives the chunk its context."""
        return f"{self.title(doc_title)}\n{self.text}"


def markdown_sections(text: str) -> list[tuple[list[str], str]]:
    """(heading path, body) per section, using markdown-it's block map for line ranges."""
    lines = text.splitlines()
    tokens = MarkdownIt("commonmark").parse(text)
    heads: list[tuple[int, int, int, str]] = []  # (start line, end line, level, text)
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map:
            inline = tokens[i + 1].content if i + 1 < len(tokens) else ""
            heads.append((tok.map[0], tok.map[1], int(tok.tag[1]), strip_anchor(inline)))
    sections: list[tuple[list[str], str]] = []
    path: list[tuple[int, str]] = []
    prev_end = 0
    current: list[str] = []
    for start, end, level, title in heads:
        body = "\n".join(lines[prev_end:start]).strip()
        if body:
            sections.append((current, body))
        path = [(lv, t) for lv, t in path if lv < level] + [(level, title)]
        current = [t for _, t in path]
        prev_end = end
    body = "\n".join(lines[prev_end:]).strip()
    if body:
        sections.append((current, body))
    return sections


def _pieces(body: str, markdown: bool = False) -> list[str]:
    """Paragraphs, and the sentences of each paragraph; in Markdown, code blocks, lists and
    tables stay whole pieces with their lines (`is_block`)."""
    out: list[str] = []
    if markdown:
        for kind, block in blocks(body):
            out.extend([block] if kind != "para" else (split_sentences(block) or [block]))
        return out
    for block in body.split("\n\n"):
        para = " ".join(block.split())
        if para:
            out.extend(split_sentences(para) or [para])
    return out


def _join(pieces: Sequence[str]) -> str:
    """Sentences join with a space; a block (code, list, table) stands on lines of its own."""
    out = ""
    for n, piece in enumerate(pieces):
        if n:
            out += "\n\n" if is_block(piece) or is_block(pieces[n - 1]) else " "
        out += piece
    return out


def _cut_words(text: str, count: CountTokens, limit: int) -> list[str]:
    words = text.split()
    out: list[str] = []
    while words:
        lo, hi = 1, len(words)
        while lo < hi:  # the longest prefix that fits
            mid = (lo + hi + 1) // 2
            if count([" ".join(words[:mid])])[0] <= limit:
                lo = mid
            else:
                hi = mid - 1
        out.append(" ".join(words[:lo]))
        words = words[lo:]
    return out


def chunk_document(
    text: str,
    *,
    title: str,
    markdown: bool,
    count_tokens: CountTokens,
    max_tokens: int = 256,
    target: int = 200,
) -> list[ChunkText]:
    sections = markdown_sections(strip_directives(text)) if markdown else [([], text)]
    chunks: list[ChunkText] = []
    for headings, body in sections:
        head = ChunkText(text="", headings=headings).title(title)
        budget = max_tokens - count_tokens([head])[0]
        goal = min(target, budget)
        pieces = _pieces(body, markdown)
        sizes = count_tokens(pieces) if pieces else []
        fitted: list[tuple[str, int]] = []
        for piece, size in zip(pieces, sizes, strict=True):
            if size <= budget:
                fitted.append((piece, size))
            else:
                for part in _cut_words(piece, count_tokens, budget):
                    fitted.append((part, count_tokens([part])[0]))
        buf: list[tuple[str, int]] = []
        for piece, size in fitted:
            # -2 per joined piece: each count includes [CLS]/[SEP], which appear once per chunk
            used = sum(s - 2 for _, s in buf) + 2
            if buf and used + size - 2 > goal:
                chunks.append(ChunkText(text=_join([p for p, _ in buf]), headings=headings))
                overlap = buf[-1]
                buf = [overlap] if sum(s - 2 for _, s in [overlap]) + size <= goal else []
            buf.append((piece, size))
        if buf:
            chunks.append(ChunkText(text=_join([p for p, _ in buf]), headings=headings))
    # a final exact check: nothing the embedder would truncate
    for c in chunks:
        if count_tokens([c.embed_text(title)])[0] > max_tokens:
            raise AssertionError("chunk over the embedder's token limit")  # pragma: no cover
    return chunks
