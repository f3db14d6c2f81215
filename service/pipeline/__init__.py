"""The answer pipeline: stages under one request budget, transport-agnostic events out."""
