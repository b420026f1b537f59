"""pipecat's two SageMaker bidirectional TTS services, their own code, against a koe server.

``NvidiaSageMakerTTSService`` (NIM's realtime events) and ``DeepgramSageMakerTTSService`` (Deepgram's)
talk to SageMaker through ``SageMakerBidiClient``, which only reaches AWS. This stands in for SageMaker
itself: a client with the same methods that opens the WebSocket SageMaker would open to the container
(``ModelInvocationPath``, ``ModelQueryString``), forwards each payload as SageMaker does (UTF8 parts as text
frames) and hands every frame back as a ``ResponseStreamEventPayloadPart``. Everything else is pipecat's.

``python pipecat_sagemaker.py <ws-url> <mode> <text>...``; modes ``nvidia``, ``nvidia-interrupt``,
``deepgram``, ``deepgram-interrupt``. Prints the audio per context (base64), the rates and the errors.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

RATE = 16000


@dataclass
class _Part:
    bytes_: bytes


@dataclass
class ResponseStreamEventPayloadPart:
    value: _Part


class SageMakerBidiClient:
    """SageMaker's side of the stream: ``endpoint_name`` is the container's WebSocket base URL."""

    def __init__(
        self,
        endpoint_name: str,
        region: str,
        model_invocation_path: str | None = "",
        model_query_string: str | None = "",
        max_connect_attempts: int = 4,
    ) -> None:
        path = model_invocation_path or "invocations-bidirectional-stream"
        self._url = f"{endpoint_name}/{path}" + (f"?{model_query_string}" if model_query_string else "")
        self._ws: ClientConnection | None = None

    async def start_session(self) -> None:
        self._ws = await connect(self._url, max_queue=None)

    async def send_json(self, data: dict[str, object]) -> None:
        assert self._ws is not None
        await self._ws.send(json.dumps(data))  # a UTF8 part: SageMaker forwards it as a text frame

    async def receive_response(self) -> ResponseStreamEventPayloadPart | None:
        assert self._ws is not None
        try:
            frame = await self._ws.recv()
        except ConnectionClosed:
            return None
        return ResponseStreamEventPayloadPart(_Part(frame.encode() if isinstance(frame, str) else frame))

    async def close_session(self) -> None:
        if self._ws is not None:
            ws, self._ws = self._ws, None
            await ws.close()

    @property
    def is_active(self) -> bool:
        return self._ws is not None


def _stub(name: str, **names: object) -> None:
    """A module whose every other attribute is a placeholder class (AWS's SDK needs Python >= 3.12)."""
    module = types.ModuleType(name)
    module.__dict__.update(names)
    module.__getattr__ = lambda attribute: type(attribute, (), {})  # type: ignore[method-assign]
    sys.modules[name] = module


def _install_transport() -> None:
    """Let pipecat's modules import (its SageMaker client imports AWS's SDK at the top), then put this
    stand-in where its two services look their client up."""
    _stub("aws_sdk_sagemaker_runtime_http2")
    _stub("aws_sdk_sagemaker_runtime_http2.client")
    _stub("aws_sdk_sagemaker_runtime_http2.config")
    _stub(
        "aws_sdk_sagemaker_runtime_http2.models",
        ResponseStreamEventPayloadPart=ResponseStreamEventPayloadPart,
    )
    _stub("smithy_aws_core")
    _stub("smithy_aws_core.identity")
    _stub("smithy_core")
    _stub("smithy_core.aio")
    _stub("smithy_core.aio.eventstream")
    from pipecat.services.deepgram.sagemaker import tts as deepgram_tts
    from pipecat.services.nvidia.sagemaker import tts as nvidia_tts

    deepgram_tts.SageMakerBidiClient = SageMakerBidiClient  # type: ignore[misc,assignment]
    nvidia_tts.SageMakerBidiClient = SageMakerBidiClient  # type: ignore[misc,assignment]


async def main(url: str, mode: str, texts: list[str]) -> dict[str, object]:
    _install_transport()
    from pipecat_speak import speak

    if mode.startswith("nvidia"):
        from pipecat.services.nvidia.sagemaker.tts import NvidiaSageMakerTTSService

        # pipecat's own default voice (Magpie-Multilingual.EN-US.Aria), which koe maps to af_heart
        tts = NvidiaSageMakerTTSService(endpoint_name=url, sample_rate=RATE)
    else:
        from pipecat.services.deepgram.sagemaker.tts import DeepgramSageMakerTTSService

        settings = DeepgramSageMakerTTSService.Settings(voice="aura-2-thalia-en")
        tts = DeepgramSageMakerTTSService(
            endpoint_name=url, region="us-east-2", sample_rate=RATE, settings=settings
        )
    return await speak(tts, texts, interrupt=mode.endswith("interrupt"))


if __name__ == "__main__":
    url, mode, *texts = sys.argv[1:]
    print(json.dumps(asyncio.run(main(url, mode, texts))))
