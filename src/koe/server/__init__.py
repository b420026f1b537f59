"""The ASGI app: SageMaker's /ping, /invocations and bidirectional stream, koe's protocol, OpenAI's API."""
