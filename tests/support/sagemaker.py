"""SageMaker's bidirectional stream, played by a WebSocket to the koe container's own path.

SageMaker hands the container's WebSocket at ``/invocations-bidirectional-stream`` the model query string
as its query, text payload parts as text frames and binary parts as binary frames, and ends the response
stream when the container closes. :class:`FakeSageMaker` does that over a real socket, so the agent runs
its real SageMaker transport (read-ahead queue, error mapping, session logic) against a live koe server;
only the SDK's HTTP/2 and SigV4 are left out (they need an AWS account).
"""

from __future__ import annotations

from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

CONTAINER_PATH = "/invocations-bidirectional-stream"


@dataclass(frozen=True)
class Call:
    endpoint_name: str
    region: str
    variant: str | None
    query: str | None


class BridgedStream:
    """A :class:`koe.client.sagemaker.FrameStream` over the container's WebSocket."""

    def __init__(self, ws: ClientConnection) -> None:
        self._ws = ws

    async def send(self, text: str) -> None:
        await self._ws.send(text)

    async def receive(self) -> str | bytes | None:
        try:
            return await self._ws.recv()
        except ConnectionClosed:
            return None  # SageMaker ends the response stream

    async def close(self) -> None:
        await self._ws.close()


class FakeSageMaker:
    """Stands in for ``open_sdk_stream``; records every call, and fails it with ``fail_with`` when set."""

    def __init__(self, container_url: str) -> None:
        self.container_url = container_url
        self.calls: list[Call] = []
        self.fail_with: Exception | None = None

    async def open(
        self, endpoint_name: str, region: str, variant: str | None, query: str | None
    ) -> BridgedStream:
        self.calls.append(Call(endpoint_name, region, variant, query))
        if self.fail_with is not None:
            raise self.fail_with
        url = self.container_url + CONTAINER_PATH + (f"?{query}" if query else "")
        return BridgedStream(await connect(url, max_size=None))
