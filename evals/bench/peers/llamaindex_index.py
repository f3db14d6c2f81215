"""The LlamaIndex peer of `ragline bench index --peer llamaindex`: index a JSONL corpus the way a
LlamaIndex user would, and print one JSON line of figures.

Runs with the peer venv's Python (`evals.bench.peers.peer_python("llamaindex")`), never
Ragline's, and imports nothing from Ragline. The setup is LlamaIndex's documented one:
`Document`s (title as metadata, so it is embedded with the text, as Ragline embeds it) → the
default `SentenceSplitter` → `HuggingFaceEmbedding` (sentence-transformers on torch) over the
packaged all-MiniLM-L6-v2 by local path (offline; it truncates at its 256-token limit) →
`QdrantVectorStore` on a local on-disk qdrant-client. torch's threads are `--threads`.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="JSONL: _id, title, text")
    parser.add_argument("--model-dir", required=True, help="a local sentence-transformers model")
    parser.add_argument("--store", type=Path, required=True, help="qdrant-client local path")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--batch", type=int, default=0, help="embed batch (0: LlamaIndex's)")
    args = parser.parse_args()
    started = time.perf_counter()

    # The peer's own (heavy) imports, timed as its start-up like Ragline's model load.
    import torch  # noqa: PLC0415
    from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex  # noqa: PLC0415
    from llama_index.core.schema import MetadataMode  # noqa: PLC0415
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding  # noqa: PLC0415
    from llama_index.vector_stores.qdrant import QdrantVectorStore  # noqa: PLC0415
    from qdrant_client import QdrantClient  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    extra = {"embed_batch_size": args.batch} if args.batch else {}
    embed = HuggingFaceEmbedding(model_name=args.model_dir, device="cpu", **extra)
    client = QdrantClient(path=str(args.store))
    store = QdrantVectorStore(client=client, collection_name="corpus")
    loaded = time.perf_counter()

    with args.corpus.open(encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    docs = [
        Document(id_=str(r["_id"]), text=r["text"], metadata={"title": r.get("title", "")})
        for r in records
    ]
    nodes = Settings.node_parser.get_nodes_from_documents(docs)
    VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    seconds = time.perf_counter() - loaded
    client.close()

    # What the model saw: each node's embedded text, cut at the model's limit (not timed).
    limit = embed.max_length
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    ids = embed._model.tokenizer(texts, add_special_tokens=True)["input_ids"]
    word_pieces = sum(min(len(i), limit) for i in ids)
    print(
        json.dumps(
            {
                "peer": "llamaindex",
                "documents": len(docs),
                "chunks": len(nodes),
                "word_pieces": word_pieces,
                "truncated_chunks": sum(len(i) > limit for i in ids),
                "load_seconds": round(loaded - started, 3),
                "seconds": round(seconds, 3),
                "threads": args.threads,
                "batch": embed.embed_batch_size,
                "max_tokens": limit,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
