"""Admission control: bounded in-flight work and queues per request class (interactive, batch),
answering 503 at once beyond them, and per-tenant token buckets answering 429.
"""
