"""The peer of the serving benchmark: a LlamaIndex retriever behind FastAPI/uvicorn.

Runs under the peer venv's Python (`evals.bench.peers.peer_python("llamaindex")`), imports
nothing from Ragline, and is started by `python -m evals.bench.serving --peer llamaindex`. What
a team would build with the framework it knows, tuned: the same all-MiniLM-L6-v2 directory
(loaded offline by path, HF_HUB_OFFLINE=1) through sentence-transformers on torch with one
thread (BLAS/OpenMP threads 1), qdrant-client in local mode (on disk), LlamaIndex's default node
parser (whole SciFact abstracts; the model truncates at 256 tokens), and
`index.as_retriever(similarity_top_k=k)` in a sync FastAPI route (its threadpool).

    python llamaindex_serve.py build --model DIR --corpus corpus.jsonl --store DIR [--docs N]
    python llamaindex_serve.py serve --model DIR --store DIR --port P

`POST /v1/search {"query", "top_k"}` answers `{"results": [{"id", "score", "text"}]}`;
`GET /readyz` is 200 once the model and the index are loaded (and warmed with one query).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.embeddings.huggingface import HuggingFaceEmbedding  # noqa: E402
from llama_index.vector_stores.qdrant import QdrantVectorStore  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from qdrant_client import QdrantClient  # noqa: E402

COLLECTION = "scifact"


class SearchBody(BaseModel):
    query: str
    top_k: int = 5


def embed_model(model_dir: str) -> HuggingFaceEmbedding:
    torch.set_num_threads(1)
    return HuggingFaceEmbedding(model_name=model_dir, device="cpu", max_length=256)


def build(args: argparse.Namespace) -> None:
    docs = []
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            docs.append(
                Document(
                    text=row.get("text", ""),
                    doc_id=str(row.get("_id") or row.get("id")),
                    metadata={"title": row.get("title", "")},
                )
            )
            if args.docs and len(docs) >= args.docs:
                break
    Settings.embed_model = embed_model(args.model)
    client = QdrantClient(path=args.store)
    store = QdrantVectorStore(collection_name=COLLECTION, client=client)
    t0 = time.perf_counter()
    VectorStoreIndex.from_documents(
        docs, storage_context=StorageContext.from_defaults(vector_store=store)
    )
    client.close()
    print(json.dumps({"docs": len(docs), "seconds": round(time.perf_counter() - t0, 1)}))


def serve(args: argparse.Namespace) -> None:
    Settings.embed_model = embed_model(args.model)
    client = QdrantClient(path=args.store)
    index = VectorStoreIndex.from_vector_store(
        QdrantVectorStore(collection_name=COLLECTION, client=client)
    )
    retrievers: dict[int, object] = {}

    def retrieve(query: str, top_k: int) -> list[dict[str, object]]:
        r = retrievers.get(top_k)
        if r is None:
            r = retrievers[top_k] = index.as_retriever(similarity_top_k=top_k)
        nodes = r.retrieve(query)  # type: ignore[attr-defined]
        return [
            {"id": n.node.ref_doc_id or n.node.node_id, "score": n.score, "text": n.node.text}
            for n in nodes
        ]

    retrieve("warm up", 5)
    app = FastAPI()

    @app.get("/readyz")
    def readyz() -> dict[str, str]:
        return {"status": "ready"}

    @app.post("/v1/search")
    def search(body: SearchBody) -> dict[str, object]:  # sync: FastAPI runs it on its threadpool
        return {"results": retrieve(body.query, body.top_k)}

    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--model", required=True)
    b.add_argument("--corpus", required=True)
    b.add_argument("--store", required=True)
    b.add_argument("--docs", type=int, default=0)
    s = sub.add_parser("serve")
    s.add_argument("--model", required=True)
    s.add_argument("--store", required=True)
    s.add_argument("--port", type=int, required=True)
    args = p.parse_args(argv)
    build(args) if args.cmd == "build" else serve(args)


if __name__ == "__main__":
    main(sys.argv[1:])
