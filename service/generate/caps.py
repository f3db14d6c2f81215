"""Output caps: what a request asks for, bounded per tenant and by the hard limit."""

from __future__ import annotations

from service.config import GeneratorSettings


def output_cap(g: GeneratorSettings, tenant_id: str, asked: int | None) -> int:
    """Tokens this request may generate: `asked` (or the default) under the tenant's cap."""
    limit = min(g.tenant_max_tokens.get(tenant_id, g.max_tokens_limit), g.max_tokens_limit)
    return max(1, min(asked or g.max_tokens, limit))
