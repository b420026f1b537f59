"""Clients for a koe server: a plain WebSocket transport and SageMaker's bidirectional stream."""
