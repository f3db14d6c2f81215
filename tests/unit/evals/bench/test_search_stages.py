"""`python -m evals.bench.search_stages` sums up where each search's time went."""

from __future__ import annotations

from evals.bench.search_stages import summarize


def test_the_summary_splits_client_time_and_finds_where_the_slowest_went() -> None:
    rows = []
    pieces = []
    for i in range(100):
        slow = i >= 95  # the slowest 5 %: a long query whose embedding took longer
        embed = 9.0 if slow else 3.0
        rows.append(
            {
                "ms": embed + 2.0 + 1.5,
                "timings_ms": {"embed": embed, "search": 2.0, "total": embed + 2.0},
            }
        )
        pieces.append(40 if slow else 10)
    s = summarize(rows, pieces)
    assert s["outside"]["p50"] == 1.5 and s["search"]["p50"] == 2.0
    assert s["slowest_5pct_mean_ms"] == {
        "client": 12.5,
        "embed": 9.0,
        "search": 2.0,
        "outside": 1.5,
        "word_pieces": 40.0,
    }
    assert s["embed_ms_by_word_pieces"]["0-15"]["p50"] == 3.0
    assert s["embed_ms_by_word_pieces"]["35-"]["p50"] == 9.0
    assert s["embed_vs_word_pieces_correlation"] == 1.0
