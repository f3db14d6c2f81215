"""Text embedders (ONNX Runtime or sentence-transformers) and the query micro-batcher."""
