"""Permission-aware caches (ARCHITECTURE §4): an in-process L1, Redis as the shared L2, request
coalescing and idempotent replays. Keys always carry the tenant, the principal's effective
visibility, the tenant's index version, the normalized request and the pipeline version.
"""
