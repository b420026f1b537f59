"""Clients for a koe server: one session interface (``session.StreamClient``) over two transports.

``websocket`` talks to a koe server directly; ``sagemaker`` goes through SageMaker AI's
``InvokeEndpointWithBidirectionalStream`` (the ``sagemaker`` extra, Python >= 3.12). Each transport's
``connect`` opens a session; the session encodes requests and decodes replies with :mod:`koe.wire`, the
protocol the server speaks too, and knows no transport.
"""
