"""Feedback rows: stored per tenant, read back for evaluators (joined with the usage record)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg


async def usage_exists(conn: asyncpg.Connection, tenant_id: str, request_id: str) -> bool:
    """Whether `tenant_id` has a usage record for `request_id` (another tenant's never counts)."""
    found = await conn.fetchval(
        "SELECT 1 FROM usage_records WHERE tenant_id = $1 AND request_id = $2 LIMIT 1",
        tenant_id,
        request_id,
    )
    return found is not None


async def record_feedback(
    conn: asyncpg.Connection,
    *,
    tenant_id: str,
    request_id: str,
    key_id: str,
    user_id: str,
    rating: str,
    comment: str,
    question: str,
    answer: str,
) -> datetime:
    """Insert, or replace this key's earlier rating of the same request; returns when."""
    at: datetime = await conn.fetchval(
        "INSERT INTO feedback (tenant_id, request_id, key_id, user_id, rating, comment, question,"
        " answer) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        " ON CONFLICT (tenant_id, request_id, key_id) DO UPDATE SET rating = EXCLUDED.rating,"
        " comment = EXCLUDED.comment, question = EXCLUDED.question, answer = EXCLUDED.answer,"
        " user_id = EXCLUDED.user_id, created_at = now()"
        " RETURNING created_at",
        tenant_id,
        request_id,
        key_id,
        user_id,
        rating,
        comment,
        question,
        answer,
    )
    return at


async def feedback_since(
    conn: asyncpg.Connection, tenant_id: str, since: datetime | None
) -> list[dict[str, Any]]:
    """The tenant's feedback (oldest first) with its request's usage record, or null if none."""
    rows = await conn.fetch(
        "SELECT f.request_id, f.rating, f.comment, f.question, f.answer, f.user_id, f.key_id,"
        " f.created_at, u.route, u.status, u.code, u.cache, u.degraded, u.tokens_in,"
        " u.tokens_out, u.ttft_ms, u.total_ms, u.prompt_version, u.created_at AS asked_at"
        " FROM feedback f LEFT JOIN LATERAL ("
        "   SELECT * FROM usage_records r WHERE r.tenant_id = f.tenant_id"
        "   AND r.request_id = f.request_id ORDER BY r.id LIMIT 1) u ON true"
        " WHERE f.tenant_id = $1 AND ($2::timestamptz IS NULL OR f.created_at >= $2)"
        " ORDER BY f.created_at, f.id",
        tenant_id,
        since,
    )
    out = []
    for r in rows:
        usage = None
        if r["route"] is not None:
            usage = {
                "asked_at": r["asked_at"].isoformat(),
                "route": r["route"],
                "status": r["status"],
                "code": r["code"],
                "cache": r["cache"],
                "degraded": list(r["degraded"]),
                "tokens_in": r["tokens_in"],
                "tokens_out": r["tokens_out"],
                "ttft_ms": r["ttft_ms"],
                "total_ms": r["total_ms"],
                "prompt_version": r["prompt_version"],
            }
        out.append(
            {
                "tenant": tenant_id,
                "request_id": r["request_id"],
                "rating": r["rating"],
                "comment": r["comment"],
                "question": r["question"],
                "answer": r["answer"],
                "user_id": r["user_id"],
                "key_id": r["key_id"],
                "created_at": r["created_at"].isoformat(),
                "usage": usage,
            }
        )
    return out
