"""A passage that only lists terms goes after every passage that says something.

A glossary or word list (`service.text.term_lists`) holds the words of any question that names
them and ranks above the page that explains them: "रिस्पॉन्स भेजने के बाद बैकग्राउंड टास्क कैसे
चलाएं?" ranked FastAPI's translation word list ("* टास्क", "* बैकग्राउंड टास्क", …) first, and
the answer quoted the list and took its page for the question's page (the how-question's
procedure is searched on the top source's page, `service.pipeline.procedure`). Such passages
keep their order among themselves, after the rest: with nothing else found they are still the
sources.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.index.protocol import Hit
from service.text.term_lists import mostly_term_lists


def term_lists_last(hits: Sequence[Hit]) -> list[Hit]:
    """`hits` (best first) with the passages that are mostly term lists moved to the end."""
    listed = [mostly_term_lists(h.text) for h in hits]
    return [h for h, t in zip(hits, listed, strict=True) if not t] + [
        h for h, t in zip(hits, listed, strict=True) if t
    ]
