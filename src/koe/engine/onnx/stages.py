"""Kokoro's single ONNX graph cut in two, in memory: a fast front (stage A) and the vocoder (stage B).

Stage A (tokens, style, speed → per-token durations, the energy curve, the frame-rate decoder's output and
the harmonic source, all for the whole segment) costs a few percent of the synthesis. Stage B (the iSTFTNet
generator) is the rest, and it can run on windows of frames — but every AdaIN block normalizes over the
whole time axis, so stage B is derived twice: once computing its normalization statistics (the whole
decode; a copy that also measures per-class moments is built for calibrations) and once taking them as inputs
(estimated per segment by :mod:`koe.engine.onnx.moments`, so a short window sounds like the whole). Running
the frame-rate decoder in stage A gives its ten norms their exact statistics at 4% of the cost;
computing the harmonic source there keeps the sine phase continuous across windows. See ``docs/engine.md``
("Streaming decoder").

The cut uses tensor names of the kokoro-onnx int8/fp32 export; another export lacks them, and
:func:`load_stages` then returns ``None`` with a logged reason so the engine decodes whole segments. A cut
proven once for a model is remembered (:mod:`koe.engine.onnx.verdict`), so later loads skip the probe and
the proof.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import Protocol

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
from onnx.utils import Extractor

from koe.engine.base import Cancel
from koe.engine.onnx.moments import MASK_INPUT, Norm, add_class_sums, class_mask, find_norms, moment_outputs
from koe.engine.onnx.sessions import RELEASING, releasing
from koe.engine.onnx.verdict import Verdict
from koe.engine.timing import FRAME_SAMPLES
from koe.engine.vocab import tokenize
from koe.errors import AssetError, SynthesisError
from koe.types import Audio

logger = logging.getLogger(__name__)

DURATIONS = "/encoder/Gather_output_0"  # int64 [n + 2]: frames per token, padding tokens included
ENERGY = "/encoder/Reshape_1_output_0"  # float [1, 2T]: log-scale energy curve, two values per frame
DECODED = "/decoder/decoder/decode.3/Div_4_output_0"  # float [1, 512, 2T]: the generator's input
HARMONIC = "/decoder/decoder/generator/Squeeze_output_0"  # float [1, 600 T]: sine source at audio rate
_CUT = (DECODED, HARMONIC)
#: Values per frame of each cut tensor along its last (time) axis.
_PER_FRAME = {DECODED: 2, HARMONIC: FRAME_SAMPLES}
_STYLE = "style"
_SPEED = "speed"
_AUDIO = "audio"
_VOCODER_PREFIX = "/decoder/decoder/generator/"
_STATISTIC_OP = "ReduceMean"

#: The probe that proves the cut ("Please call Stella."): short, because it is decoded three times by the
#: proof, yet long enough (80 frames with the probe style) to time windows on.
PROBE_PHONEMES = "plˈiz kˈɔl stˈɛlə."

FloatArray = npt.NDArray[np.float32]
#: Normalization statistics of stage B, in the order of :attr:`Stages.statistic_names`.
Statistics = tuple[FloatArray, ...]
Sums = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Front:
    """Stage A's output for one segment: durations and the frame-rate tensors stage B decodes."""

    durations: npt.NDArray[np.int64]
    energy: FloatArray  # two values per frame: where the segment is quiet
    tensors: dict[str, FloatArray]  # the cut tensors, full length

    @property
    def frames(self) -> int:
        return int(self.durations.sum())

    def window(self, start: int, end: int) -> dict[str, FloatArray]:
        """The cut tensors for frames ``[start, end)``: stage B's input for that window."""
        return {name: value[..., start * _PER_FRAME[name] : end * _PER_FRAME[name]]
                for name, value in self.tensors.items()}  # fmt: skip


class Stages:
    """Three sessions — the front, the vocoder with its own statistics, the vocoder with frozen ones — and a
    fourth built only while calibrating, which measures per-class moments (:mod:`koe.engine.onnx.moments`)."""

    def __init__(
        self,
        front: ort.InferenceSession,
        vocoder: ort.InferenceSession,
        frozen: ort.InferenceSession,
        token_input: str,
        statistic_names: tuple[str, ...],
        norms: tuple[Norm, ...],
        measuring: Callable[[], ort.InferenceSession],
    ) -> None:
        self._front = front
        self._vocoder = vocoder
        self._frozen = frozen
        self._measuring = measuring
        self._token_input = token_input
        self.statistic_names = statistic_names
        self.norms = norms
        self._runs_lock = threading.Lock()
        self._runs_begun = 0
        self._runs_running = 0
        shapes = {value.name: value.shape for value in frozen.get_inputs()}
        #: channels of each statistic (``[1, C, 1]``), ``None`` where the graph leaves it symbolic
        self.channels = tuple(
            shape[1] if len(shape) == 3 and isinstance(shape[1], int) else None
            for shape in (shapes[name] for name in statistic_names)
        )

    def run_front(
        self, ids: list[int], style_row: FloatArray, speed: float, options: ort.RunOptions | None = None
    ) -> Front:
        """Stage A on one segment's token ids (without the padding tokens, which are added here); each run
        here takes ``options``, whose terminate flag stops it (``SynthesisError``)."""
        feeds: dict[str, npt.NDArray[np.generic]] = {
            self._token_input: np.array([[0, *ids, 0]], dtype=np.int64),
            _STYLE: style_row,
            _SPEED: np.array([speed], dtype=np.float32),
        }
        durations, energy, *tensors = self._run(self._front, feeds, [DURATIONS, ENERGY, *_CUT], options)
        front = Front(np.asarray(durations, dtype=np.int64), energy, dict(zip(_CUT, tensors, strict=True)))
        for name, value in front.tensors.items():
            if value.shape[-1] != front.frames * _PER_FRAME[name]:
                raise SynthesisError(f"{name} has {value.shape[-1]} steps for {front.frames} frames")
        return front

    def decode(
        self, front: Front, style_row: FloatArray, options: ort.RunOptions | None = None
    ) -> tuple[Audio, Statistics]:
        """The whole segment with its own statistics (identical to the single graph), and those statistics."""
        audio, *statistics = self._run(
            self._vocoder, {**front.tensors, _STYLE: style_row}, [_AUDIO, *self.statistic_names], options
        )
        return audio.reshape(-1), tuple(statistics)

    def class_sums(self, takes: Sequence[tuple[Front, FloatArray]]) -> list[tuple[Sums, Sums, Sums]]:
        """Per norm, over the whole decodes of ``takes`` (front, style row): the per-class sums of its
        input and of its square (``[2, C]`` each) and the class counts (``[2]``), in float64. The measuring
        session is built for the call and dropped after it: calibration is rare, and measuring in the
        everyday vocoder would slow every decode by its extra outputs."""
        names = [name for index in range(len(self.norms)) for name in moment_outputs(index)]
        measuring = self._measuring()
        totals: list[tuple[Sums, Sums, Sums]] = []
        for front, style_row in takes:
            feeds = {**front.tensors, _STYLE: style_row, MASK_INPUT: class_mask(front.energy)}
            values = [value.astype(np.float64) for value in self._run(measuring, feeds, names)]
            parts = [
                (total[0].T, square_total[0].T, count.reshape(-1))
                for total, square_total, count in zip(values[0::3], values[1::3], values[2::3], strict=True)
            ]
            totals = parts if not totals else [
                (a[0] + b[0], a[1] + b[1], a[2] + b[2]) for a, b in zip(totals, parts, strict=True)
            ]  # fmt: skip
        return totals

    def decode_window(
        self,
        front: Front,
        style_row: FloatArray,
        statistics: Statistics,
        start: int,
        end: int,
        options: ort.RunOptions | None = None,
    ) -> Audio:
        """Frames ``[start, end)`` with frozen statistics: ``(end - start) * 600`` samples."""
        feeds = {**front.window(start, end), _STYLE: style_row}
        feeds.update(zip(self.statistic_names, statistics, strict=True))
        (audio,) = self._run(self._frozen, feeds, [_AUDIO], options)
        return audio.reshape(-1)

    def runs(self) -> tuple[int, int]:
        """Runs begun so far and runs in progress, on any thread: a measurement of these stages' speed
        ran alone if none was in progress when it began and only its own began until it ended."""
        with self._runs_lock:
            return self._runs_begun, self._runs_running

    def _run(
        self,
        session: ort.InferenceSession,
        feeds: Mapping[str, npt.NDArray[np.generic]],
        outputs: list[str],
        options: ort.RunOptions | None = None,
    ) -> list[FloatArray]:
        with self._runs_lock:
            self._runs_begun += 1
            self._runs_running += 1
        try:
            result: list[FloatArray] = session.run(outputs, feeds, options or RELEASING)
        except Exception as exc:  # onnxruntime's errors are untyped
            raise SynthesisError(f"stage inference failed: {exc}") from exc
        finally:
            with self._runs_lock:
                self._runs_running -= 1
        return result


def stoppable(cancel: threading.Event | None) -> ort.RunOptions:
    """Run options that give the arena back (:func:`~koe.engine.onnx.sessions.releasing`), whose terminate
    flag ``cancel`` sets where it is a :class:`Cancel` (a run then stops within a node of the graph, raising
    ``SynthesisError``)."""
    options = releasing()
    if isinstance(cancel, Cancel):
        cancel.on_set(partial(setattr, options, "terminate", True))
    return options


def parse(model: bytes) -> onnx.ModelProto:
    """The model's graph; raises ``AssetError`` when onnx cannot read it."""
    try:
        return onnx.load_from_string(model)
    except Exception as exc:  # onnx raises DecodeError and friends
        raise AssetError(f"the model could not be parsed by onnx: {exc}") from exc


class StageSessions(Protocol):
    """Sessions of graphs (:class:`koe.engine.onnx.sessions.OptimizedSessions`): of bytes, or of a graph
    that a name identifies, kept from an earlier start, whose bytes are made only when it was not."""

    def __call__(self, graph: bytes, keep: bool = True) -> ort.InferenceSession: ...

    def named(self, name: str, graph: Callable[[], bytes]) -> ort.InferenceSession: ...


@dataclass(frozen=True, slots=True)
class _Graphs:
    front: bytes
    vocoder: bytes
    frozen: bytes
    vocoder_graph: onnx.ModelProto  # what the measuring graph is made of


def derive(
    proto: onnx.ModelProto,
    sessions: StageSessions,
    token_input: str,
    model: bytes,
    kept_as: str | None = None,
) -> Stages:
    """Cut the model (``proto``, parsed from ``model``) into the three stage sessions; raises
    ``AssetError`` when the graph is another export. ``kept_as`` identifies this cut of these bytes (the
    verdict's key): the sessions kept under it from an earlier start are used as they are, and the graphs
    are extracted only for those that were not (extracting them holds the GIL, beside the G2P's build);
    without it, they are extracted and their sessions found by their bytes."""
    produced = {output for node in proto.graph.node for output in node.output}
    missing = [name for name in (DURATIONS, ENERGY, *_CUT, _AUDIO) if name not in produced]
    inputs = {value.name for value in proto.graph.input}
    missing += [name for name in (token_input, _STYLE, _SPEED) if name not in inputs]
    if missing:
        raise AssetError(f"the graph has no tensors {missing}: not the export the stage cut was made for")
    statistics = tuple(
        output
        for node in proto.graph.node
        if node.op_type == _STATISTIC_OP and node.name.startswith(_VOCODER_PREFIX)
        for output in node.output
    )
    if not statistics:
        raise AssetError(f"the vocoder has no {_STATISTIC_OP} nodes to freeze: not the expected export")
    try:
        norms = find_norms(proto.graph, statistics)
    except ValueError as exc:
        raise AssetError(str(exc)) from exc
    graphs = cache(lambda: _extract(proto, token_input, statistics))
    try:
        if kept_as is None:
            built = [sessions(graph) for graph in (graphs().front, graphs().vocoder, graphs().frozen)]
        else:
            built = [sessions.named(f"{kept_as} {part}", partial(_part, graphs, part)) for part in _PARTS]
    except AssetError:
        raise
    except Exception as exc:  # onnxruntime refuses a derived graph
        raise AssetError(f"ONNX Runtime could not load a stage: {exc}") from exc

    # a start that extracted the stages (a first one, whose voices are not calibrated yet) keeps the graph
    # calibrations measure with; a later one cuts it from the model's bytes if a voice needs calibrating
    kept = _measuring(graphs().vocoder_graph, norms) if graphs.cache_info().currsize else None

    def measuring() -> ort.InferenceSession:
        """Built only to calibrate a voice (rare), and not kept optimized for the next start."""
        graph = kept or _measuring(_vocoder(Extractor(parse(model)), statistics), norms)
        return sessions(graph, keep=False)

    front_session, vocoder_session, frozen_session = built
    return Stages(
        front_session, vocoder_session, frozen_session, token_input, statistics, norms, measuring
    )  # fmt: skip


_PARTS = ("front", "vocoder", "frozen")


def _part(graphs: Callable[[], _Graphs], part: str) -> bytes:
    graph: bytes = getattr(graphs(), part)
    return graph


def _measuring(vocoder: onnx.ModelProto, norms: tuple[Norm, ...]) -> bytes:
    """The vocoder that also sums per-class moments (:func:`add_class_sums`), serialized."""
    graph = onnx.ModelProto()
    graph.CopyFrom(vocoder)
    add_class_sums(graph.graph, norms)
    _check_inputs("stage B (measuring)", graph, {*_CUT, _STYLE, MASK_INPUT})
    data: bytes = graph.SerializeToString()
    return data


def _vocoder(extractor: Extractor, statistics: tuple[str, ...]) -> onnx.ModelProto:
    return extractor.extract_model([*_CUT, _STYLE], [_AUDIO, *statistics])


def _extract(proto: onnx.ModelProto, token_input: str, statistics: tuple[str, ...]) -> _Graphs:
    """The three stage graphs' bytes; raises ``AssetError`` when the graph cannot be cut."""
    extractor = Extractor(proto)
    try:
        front = extractor.extract_model([token_input, _STYLE, _SPEED], [DURATIONS, ENERGY, *_CUT])
        vocoder = _vocoder(extractor, statistics)
        frozen = extractor.extract_model([*_CUT, _STYLE, *statistics], [_AUDIO])
    except Exception as exc:  # onnx's extractor raises assorted errors on unexpected graphs
        raise AssetError(f"the graph could not be cut into stages: {exc}") from exc
    _check_inputs("stage A", front, {token_input, _STYLE, _SPEED})
    _check_inputs("stage B", vocoder, {*_CUT, _STYLE})
    _check_inputs("stage B (frozen)", frozen, {*_CUT, _STYLE, *statistics})
    return _Graphs(
        front.SerializeToString(), vocoder.SerializeToString(), frozen.SerializeToString(), vocoder
    )


def _check_inputs(stage: str, graph: onnx.ModelProto, expected: set[str]) -> None:
    got = {value.name for value in graph.graph.input}
    if got != expected:
        raise AssetError(f"{stage} needs inputs {sorted(got - expected)} beyond the cut")


WholeDecode = Callable[[list[int], FloatArray, float], Audio]


@dataclass(frozen=True, slots=True)
class Probe:
    """The probe decoded through A→B: what every load computes, and what the proof compares."""

    front: Front
    audio: Audio
    statistics: Statistics


def run_probe(stages: Stages, style_row: FloatArray, options: ort.RunOptions | None = None) -> Probe:
    """The probe through stage A and stage B."""
    front = stages.run_front(tokenize(PROBE_PHONEMES), style_row, 1.0, options)
    audio, statistics = stages.decode(front, style_row, options)
    return Probe(front, audio, statistics)


def verify(stages: Stages, whole: WholeDecode, style_row: FloatArray, probe: Probe) -> None:
    """Prove on the probe that A→B reproduces the single graph bit for bit, with its own statistics both
    computed and fed back frozen; raises ``AssetError`` otherwise."""
    expected = whole(tokenize(PROBE_PHONEMES), style_row, 1.0)
    front = probe.front
    if front.frames * FRAME_SAMPLES != expected.size:
        raise AssetError(
            f"durations sum to {front.frames} frames ({front.frames * FRAME_SAMPLES} samples) but the whole "
            f"graph gives {expected.size} samples"
        )
    if not np.array_equal(probe.audio, expected):
        raise AssetError(
            f"stage A→B differs from the whole graph by {np.abs(probe.audio - expected).max():.3g}"
        )
    refed = stages.decode_window(front, style_row, probe.statistics, 0, front.frames)
    if not np.array_equal(refed, expected):
        raise AssetError(f"stage B with statistics fed back differs by {np.abs(refed - expected).max():.3g}")


def load_stages(
    proto: onnx.ModelProto,
    model: bytes,
    sessions: StageSessions,
    token_input: str,
    whole: WholeDecode,
    style_row: FloatArray,
    verdict: Verdict | None = None,
) -> tuple[Stages, Probe | None] | None:
    """Derived stages and, when the probe was decoded, the probe through them; ``None`` (logged) when the
    engine must decode whole segments. Neither the probe nor the proof (:func:`verify`) runs when
    ``verdict`` says this very cut was proven on this CPU before; the proof does not when the probe decodes
    to the bytes it was proven with on another; a proof that runs and holds is recorded there."""
    try:
        kept_as = None if verdict is None else f"stage cut {verdict.key.digest}"
        stages = derive(proto, sessions, token_input, model, kept_as)
        if verdict is not None and verdict.proven():
            logger.info("stage cut proven before for this model on this CPU (%s)", verdict.path)
            return stages, None
        probe = run_probe(stages, style_row)
        if verdict is not None and verdict.confirms(probe.audio):
            logger.info("stage cut proven on another CPU; its probe decodes to the same bytes here")
            verdict.remember(probe.audio)
            return stages, probe
        verify(stages, whole, style_row, probe)
    except (AssetError, SynthesisError) as exc:
        logger.warning("streaming decoder disabled, whole segments will be decoded: %s", exc.message)
        return None
    logger.info("stage cut verified bit-exact on a %d-frame probe", probe.front.frames)
    if verdict is not None:
        verdict.remember(probe.audio)
    return stages, probe
