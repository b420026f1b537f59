"""What crosses the wire, shared by every transport (the TTS server, the agent) and koe's clients.

One JSON-object parser with the limits every transport applies, the field validators, the streaming
protocol's messages both ways, and the one table that says how each error reaches a client.
"""
