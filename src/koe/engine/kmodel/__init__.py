"""Kokoro's PyTorch model (hexgrad's ``KModel``) behind the torch engine: its checkpoint (found, verified,
loaded; made by :mod:`koe.conversion` when it is derived) and a batched forward pass whose padding is
masked so that an utterance sounds the same alone or in a batch. Importing it needs torch and
``kokoro`` (the GPU extra); the engine itself is :mod:`koe.engine.torch`.
"""
