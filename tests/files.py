"""Small real files of every format the indexer reads, made with real libraries."""

from __future__ import annotations

from pathlib import Path

import docx
from fpdf import FPDF

from tests.helpers import write

HTML = """<!doctype html><html lang="en"><head><title>Deploy guide</title></head><body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/pricing">Pricing plans</a></li>
<li><a href="/jobs">Careers at Acme</a></li></ul></nav>
<main><article><h1>Deploy guide</h1>
<p>The heron pipeline ships every release to the staging cluster before noon on Mondays.</p>
<h2>Rollbacks</h2>
<p>Rollbacks restore the previous release tag and finish within five minutes of the request.</p>
</article></main>
<footer>Copyright 2026 Acme Corp. All rights reserved. Privacy policy and cookie settings.</footer>
</body></html>"""


def make_pdf(path: Path, pages: list[str], title: str = "") -> Path:
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_report_pdf(path: Path) -> Path:
    """A two-page report as a word processor sets one: a large title, bold section headings,
    a numbered heading in the body font, and body paragraphs that wrap over several lines."""
    pdf = FPDF()
    pdf.set_title("Otter survey")

    def line(text: str, style: str = "", size: int = 11, height: int = 6) -> None:
        pdf.set_font("Helvetica", style, size)
        pdf.multi_cell(0, height, text, new_x="LMARGIN", new_y="NEXT")

    pdf.add_page()
    line("Otter survey 2026", "B", 20, 12)
    line("3 Method", "B", 14, 9)
    line("We counted otters on twelve rivers from March to June. " * 3)
    line("3.2 Results", "B", 12, 8)
    line("The model found otters in nine of the twelve rivers. It missed three small streams.")
    pdf.add_page()
    line("4 Discussion")  # numbered, in the body font
    line("Otters avoided rivers with heavy boat traffic during the survey.")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_docx(path: Path, title: str, sections: list[tuple[str, str]]) -> Path:
    d = docx.Document()
    d.add_heading(title, level=1)
    for heading, body in sections:
        d.add_heading(heading, level=2)
        d.add_paragraph(body)
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Region"
    table.cell(0, 1).text = "Owner"
    table.cell(1, 0).text = "Pune"
    table.cell(1, 1).text = "Meera"
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(str(path))
    return path


def make_corpus(root: Path) -> Path:
    """One document of each format (and two JSONL records) under `root`."""
    write(
        root,
        "guide.md",
        "---\ntitle: Onboarding\nacl: [group:eng]\nteam: platform\n---\n# Onboarding\n\n"
        "New engineers get a laptop and a pairing buddy in their first week.\n",
    )
    write(root, "notes.txt", "Lunch notes\n\nThe canteen serves masala dosa every Thursday.\n")
    write(root, "site/deploy.html", HTML)
    make_pdf(
        root / "reports/q3.pdf",
        ["Quarterly report. Revenue from the otter product line grew by twelve percent.",
         "Second page. The otter team hired four engineers in Lisbon."],
        title="Q3 report",
    )  # fmt: skip
    make_docx(
        root / "policies/travel.docx",
        "Travel policy",
        [("Booking", "Book flights through the portal at least two weeks ahead."),
         ("Expenses", "Submit receipts for taxis within thirty days of the trip.")],
    )  # fmt: skip
    write(
        root,
        "faq.jsonl",
        '{"_id": "faq-1", "title": "Parking", "text": "Visitor parking is on level minus two."}\n'
        '{"id": 7, "title": "Wifi", "text": "The guest wifi password changes monthly.",'
        ' "acl": ["group:staff"], "metadata": {"team": "it"}}\n',
    )
    return root
