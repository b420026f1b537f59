"""Clients for a koe server: one session interface (``session.StreamClient``) over two transports.

``websocket`` talks to a koe server directly; ``sagemaker`` goes through SageMaker AI's
``InvokeEndpointWithBidirectionalStream`` (the ``sagemaker`` extra, Python >= 3.12). ``messages``
encodes requests and decodes replies without I/O, with the server's own protocol dataclasses.
"""
