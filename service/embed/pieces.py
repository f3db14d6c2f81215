"""The embedder's word-piece vectors: its input embedding table, read without a model run.

Token alignment (`service.answerability.alignment`) matches each content word piece of a
question against the word pieces of its best sentences. It first read the model's contextual
token states, two model runs per question (~60 tokens of sentences: 15–20 ms on one core here,
on ~20 % of English answers); over the answerability fit's 2,136 English questions the table's
own rows (the vectors the model starts from) give the same abstention within one standard
error (README, issue #18), in well under a millisecond: a tokenizer pass and a row lookup.

The table is the model's `embeddings.word_embeddings.weight`, read from its safetensors file
(sentence-transformers' layout; a model without one has no alignment and answerability decides
without it), L2-normalized and kept as float16 (30,522 × 384 for MiniLM: 23 MB).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from service.embed.protocol import TokenStates

log = logging.getLogger("ragline.embed")

TABLE_KEY = "embeddings.word_embeddings.weight"
"""The word-piece table's tensor in a BERT-family model's safetensors file (some exports
prefix it, e.g. `bert.`: the key is matched by its ending)."""


class PieceVectors:
    """A text's word pieces (the model's tokenizer, no truncation beyond `max_tokens`) and each
    one's L2-normalized input vector."""

    def __init__(self, tokenizer: Tokenizer, table: npt.NDArray[np.float16]) -> None:
        self._tokenizer = tokenizer
        self._table = table

    @classmethod
    def load(cls, model_dir: Path) -> PieceVectors:
        """Raises FileNotFoundError / KeyError when the model has no table to read."""
        from safetensors import safe_open  # noqa: PLC0415  (only where alignment is on)

        with safe_open(str(model_dir / "model.safetensors"), framework="np") as f:
            key = next((k for k in f.keys() if k.endswith(TABLE_KEY)), None)  # noqa: SIM118
            if key is None:
                raise KeyError(f"{model_dir}: no {TABLE_KEY}")
            table = np.asarray(f.get_tensor(key), dtype=np.float32)
        table /= np.clip(np.linalg.norm(table, axis=1, keepdims=True), 1e-9, None)
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return cls(tokenizer, table.astype(np.float16))

    def states(self, text: str, max_tokens: int) -> TokenStates:
        """`text`'s word-piece vectors (truncated at `max_tokens` model tokens, its special
        tokens counted and left out) and each piece's char offsets in `text`."""
        e = self._tokenizer.encode(text)
        ids, special, offsets = e.ids, e.special_tokens_mask, e.offsets  # each a new list
        n = min(len(ids), max_tokens - 1)  # as the model would read it: [SEP] last
        keep = [i for i in range(n) if not special[i]]
        vecs = self._table[[ids[i] for i in keep]].astype(np.float32)
        return vecs, [offsets[i] for i in keep]


@lru_cache(maxsize=4)
def piece_vectors(model_dir: Path) -> PieceVectors | None:
    """The model's word-piece vectors, read once per process; None (logged) when it has none."""
    try:
        return PieceVectors.load(model_dir)
    except (OSError, KeyError, ValueError) as exc:
        log.warning("no word-piece vectors (%s): answerability decides without alignment", exc)
        return None
