"""Stdlib-only check of a vLLM (or any OpenAI-compatible) server: one streaming
/v1/chat/completions request, printing TTFT, total time and decode tok/s; with
--abort-after N it closes the stream after N content chunks (the server should
then log an aborted request).

  python stream_check.py [--port 18011] [--prompt-words 450] [--max-tokens 128] [--abort-after N]
"""
from __future__ import annotations

import argparse
import http.client
import json
import time

FILLER = (
    "Ragline answers questions from permission-filtered documents. Each chunk carries "
    "a tenant id, an access list, a title and a source address. "
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18011)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--prompt-words", type=int, default=450, help="approximate context size")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--abort-after", type=int, default=0, help="close stream after N chunks")
    ap.add_argument("--tag", default="", help="prefix the prompt so it misses the prefix cache")
    a = ap.parse_args()

    words = FILLER.split()
    context = " ".join(words[i % len(words)] for i in range(a.prompt_words))
    body = {
        "model": a.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": a.max_tokens,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": f"{a.tag}Answer from the context.\n\nContext:\n{context}"},
            {"role": "user", "content": "Summarise what Ragline does in three sentences."},
        ],
    }
    conn = http.client.HTTPConnection(a.host, a.port, timeout=120)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise SystemExit(f"HTTP {resp.status}: {resp.read()[:500]!r}")
    t_first = t_last = None
    chunks, text, usage = 0, [], None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        ev = json.loads(data)
        usage = ev.get("usage") or usage
        for ch in ev.get("choices", []):
            piece = ch.get("delta", {}).get("content")
            if piece:
                now = time.perf_counter()
                t_first = t_first or now
                t_last = now
                chunks += 1
                text.append(piece)
        if a.abort_after and chunks >= a.abort_after:
            conn.close()  # drop the TCP connection mid-stream
            print(f"closed stream after {chunks} chunks, {time.perf_counter() - t0:.3f}s")
            return
    total = time.perf_counter() - t0
    out = {
        "ttft_s": round(t_first - t0, 3) if t_first else None,
        "total_s": round(total, 3),
        "prompt_tokens": usage and usage.get("prompt_tokens"),
        "completion_tokens": usage and usage.get("completion_tokens"),
    }
    n = out["completion_tokens"] or chunks
    if t_first and t_last and n > 1 and t_last > t_first:
        out["decode_tok_s"] = round((n - 1) / (t_last - t_first), 1)
    print(json.dumps(out))
    print("text:", "".join(text)[:300].replace("\n", " "))


if __name__ == "__main__":
    main()
