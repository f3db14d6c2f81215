"""Generators: stream answer text from the question and numbered sources."""
