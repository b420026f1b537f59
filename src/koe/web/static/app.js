// The page: one WebSocket to the agent (agent/ws), one AudioWorklet player, and what the user sees.
//
// Everything measured is kept on window.koe (timings in ms since the request was sent), so that a test —
// or a curious user in the console — can read exactly what happened.

import { Player } from "./player.js";

const $ = (id) => document.getElementById(id);
const MARKS = ["requestSent", "firstToken", "firstSegment", "firstAudioQueued", "firstAudioPlayed",
  "lastToken", "lastAudio"];

const koe = {
  state: "connecting", // connecting | ready | speaking | stopped | done | closed
  mode: "ask",
  turn: null, // the turn number being played (events of other turns are ignored)
  simulated: false,
  answer: "",
  segments: [], // { index, text, span, start, end, words } — start/end in samples of the turn
  spokenWords: [], // each word highlighted while played, in order: { index, word, span }
  heardSegments: 0,
  timings: {},
  played: 0, queued: 0, level: 0, stalls: 0, dry: false, dryAt: null, audioFrames: 0, samplesAfterStop: 0,
  clearedAck: false,
  log: [],
};
window.koe = koe;

let socket = null;
let pendingAudio = null; // the header of the binary frame that comes next
let sentAt = 0;
let lastDeltaAt = null; // ms of the latest text delta: "text finished" only once the turn says it is
let info = { sample_rate: 24000, voices: [], llm_available: false };
// A server with KOE_API_KEY needs the key: open the page as /#api_key=<key> (a fragment never reaches a
// server or its logs). The WebSocket carries it as ?api_key=, since browsers cannot set its headers.
const fragment = new URLSearchParams(location.hash.slice(1));
const apiKey = fragment.get("api_key");
// A deployed agent (AgentCore Runtime): /#agent=<its wss:// URL>, presigned by `koe agent-url`, or with
// &token=<JWT> for a JWT authorizer; the token travels as AgentCore's subprotocol. docs/deploy.md.
const agentUrl = fragment.get("agent");
const token = fragment.get("token");

const player = new Player(24000, {
  started: () => mark("firstAudioPlayed"),
  progress: (m) => {
    koe.played = m.played; koe.queued = m.queued; koe.level = m.level;
    if (koe.state === "stopped" && koe.clearedAck) koe.samplesAfterStop = m.played; // counted from the clear
    render();
  },
  drained: (m) => {
    koe.played = m.played;
    koe.dryAt = performance.now();
    if (koe.state === "done") finishPlayback();
    else koe.dry = true; // more audio may come: if it does, the listener heard a gap
    render();
  },
  cleared: () => { koe.clearedAck = true; koe.played = 0; koe.queued = 0; koe.level = 0; render(); },
});

function finishPlayback() {
  koe.timings.lastAudio = Math.round((koe.dryAt ?? performance.now()) - sentAt);
  koe.state = "ready";
  setBusy(false);
}

function mark(name) {
  if (sentAt === 0 || koe.timings[name] !== undefined) return;
  koe.timings[name] = Math.round(performance.now() - sentAt);
}

// --- connection ---------------------------------------------------------------------------------------

/** The voice picker's options: one group per language (the voice's language is the one it speaks). */
function voiceOptions(info) {
  const option = (v) => new Option(v, v, v === info.default_voice, v === info.default_voice);
  const groups = info.voice_groups && info.voice_groups.length ? info.voice_groups : null;
  if (!groups) return (info.voices.length ? info.voices : [info.default_voice]).map(option);
  return groups.map((group) => {
    const element = document.createElement("optgroup");
    element.label = group.language;
    element.dataset.lang = group.lang;
    element.append(...group.voices.map(option));
    return element;
  });
}

async function connect() {
  if (agentUrl) {
    info = await openSocket(agentUrl, token ? [`base64UrlBearerAuthorization.${base64url(token)}`, "base64UrlBearerAuthorization"] : []);
  } else {
    const response = await fetch("agent/info", apiKey ? { headers: { Authorization: `Bearer ${apiKey}` } } : {});
    if (response.status === 401) { status("this server needs its API key: open the page as /#api_key=<key>"); return; }
    info = await response.json();
  }
  $("llm").textContent = info.llm_available ? `LLM: ${info.llm}` : "No LLM configured — read-aloud works.";
  if (!info.llm_available) { $("no-llm").textContent = info.how_to_enable; $("no-llm").hidden = false; }
  $("voice").replaceChildren(...voiceOptions(info));
  player.sampleRate = info.sample_rate;
  if (!agentUrl) {
    const url = new URL("agent/ws", location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    if (apiKey) url.searchParams.set("api_key", apiKey);
    openSocket(url, []).catch(() => {}); // a failure closes the socket, and its close handler says so
  }
  setMode(info.llm_available ? "ask" : "read");
}

// The agent's socket; resolves with the `info` its first (`session`) message carries.
function openSocket(url, protocols) {
  return new Promise((resolve, reject) => {
    socket = new WebSocket(url, protocols);
    socket.binaryType = "arraybuffer";
    socket.onmessage = (event) => {
      if (typeof event.data !== "string") return onAudio(event.data);
      const message = JSON.parse(event.data);
      if (message.type === "session") resolve(message.info);
      onEvent(message);
    };
    socket.onerror = () => reject(new Error(`the WebSocket to ${new URL(url).host} failed`));
    socket.onclose = () => { koe.state = "closed"; status("disconnected — reload to reconnect"); setBusy(false); };
  });
}

function base64url(text) {
  return btoa(String.fromCharCode(...new TextEncoder().encode(text))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function onEvent(event) {
  koe.log.push(event.type);
  switch (event.type) {
    case "session": koe.state = "ready"; status("ready"); break;
    case "turn":
      koe.turn = event.turn; koe.simulated = event.simulated;
      $("answer-sim").hidden = !event.simulated;
      status(event.simulated ? `${event.source}` : `asking ${event.source}`);
      break;
    case "text_delta":
      if (event.turn !== koe.turn || koe.state === "stopped") return;
      mark("firstToken");
      lastDeltaAt = Math.round(performance.now() - sentAt);
      koe.answer += event.text;
      break;
    case "segment":
      if (event.turn !== koe.turn || koe.state === "stopped") return;
      mark("firstSegment");
      koe.segments.push({ index: event.index, text: event.text, span: event.source_span, start: 0, end: 0,
        words: event.words ?? [] });
      break;
    case "audio": pendingAudio = event; return;
    case "done":
      if (event.turn !== koe.turn) return;
      koe.server = event.timings;
      if (!event.interrupted && lastDeltaAt !== null) koe.timings.lastToken = lastDeltaAt;
      if (koe.state === "speaking") {
        koe.state = "done";
        if (koe.dry || event.audio_s === 0) finishPlayback(); // everything sent has been played already
      }
      status(event.interrupted ? "interrupted" : `done — ${event.audio_s.toFixed(1)} s of audio`);
      break;
    case "interrupted": status(`stopped; the agent remembers: “${event.heard_text}”`); break;
    case "reconnected": status(event.message); break;
    case "error":
      status(`error (${event.code}): ${event.message}`);
      if (event.turn === null && koe.state === "speaking") { koe.state = "ready"; setBusy(false); }
      break;
  }
  render();
}

function onAudio(buffer) {
  const header = pendingAudio;
  pendingAudio = null;
  if (!header || header.turn !== koe.turn || koe.state === "stopped") return; // stale audio is never played
  const segment = koe.segments.find((s) => s.index === header.index);
  const start = player.pushed;
  const samples = player.push(buffer);
  koe.audioFrames += 1;
  if (koe.dry) { koe.stalls += 1; koe.dry = false; }
  mark("firstAudioQueued");
  if (segment) { if (segment.end === 0) segment.start = start; segment.end = start + samples; } // pieces in order
  render();
}

// --- actions ----------------------------------------------------------------------------------------------

async function go(event) {
  event.preventDefault();
  if (!socket || socket.readyState !== WebSocket.OPEN) return;
  await player.ensure(); // this click is the user gesture that lets audio start
  Object.assign(koe, { answer: "", segments: [], spokenWords: [], timings: {}, played: 0, queued: 0,
    stalls: 0, dry: false, dryAt: null, audioFrames: 0, samplesAfterStop: 0, clearedAck: false,
    heardSegments: 0, turn: null, server: null });
  lastDeltaAt = null;
  player.clear(); // a new question while one is spoken is a barge-in: the server interrupts that turn
  const common = { voice: $("voice").value, speed: Number($("speed").value) };
  const request = koe.mode === "ask"
    ? { type: "ask", prompt: $("prompt").value, ...common }
    : { type: "read", text: $("text").value, tokens_per_s: Number($("rate").value), ...common };
  koe.state = "speaking";
  sentAt = performance.now();
  mark("requestSent");
  socket.send(JSON.stringify(request));
  setBusy(true);
  render();
}

function stop() {
  if (koe.state !== "speaking" && koe.state !== "done") return;
  koe.clearedAck = false;
  player.clear(); // silence now; the server is told afterwards
  koe.state = "stopped";
  mark("stopped");
  socket.send(JSON.stringify({ type: "interrupt", heard_segments: koe.heardSegments }));
  setBusy(false);
  render();
}

function setMode(mode) {
  koe.mode = mode;
  for (const tab of document.querySelectorAll("[role=tab]")) tab.setAttribute("aria-selected", String(tab.dataset.mode === mode));
  $("ask-panel").hidden = mode !== "ask";
  $("read-panel").hidden = mode !== "read";
  $("go").textContent = mode === "ask" ? "Ask" : "Read aloud";
  $("go").disabled = mode === "ask" && !info.llm_available;
}

function setBusy(busy) {
  $("stop").disabled = !busy;
}

function status(text) { $("status").textContent = text; }

// --- rendering ------------------------------------------------------------------------------------------

// The word of segment s being played: the last one whose start the worklet's position has passed (its
// times are seconds from the segment's first sample), so a pause keeps the word before it lit.
function playingWord(s) {
  const at = (koe.played - s.start) / player.sampleRate;
  let playing = null;
  for (const w of s.words) if (w.start_s <= at) playing = w;
  return playing;
}

function render() {
  const current = koe.segments.findIndex((s) => s.end > s.start && koe.played >= s.start && koe.played < s.end);
  const started = koe.segments.filter((s) => s.end > s.start && koe.played > s.start).length;
  koe.heardSegments = Math.max(koe.heardSegments, started);
  const parts = [];
  let at = 0;
  koe.segments.forEach((s, i) => {
    const kind = i === current ? "current" : koe.played >= s.end && s.end > 0 ? "heard" : "ready";
    // what lies between two segments (spaces, markup not spoken) was passed once the next one is heard
    if (s.span[0] > at) parts.push([kind === "heard" ? "heard" : "pending", koe.answer.slice(at, s.span[0])]);
    const word = i === current && koe.state !== "stopped" ? playingWord(s) : null;
    if (word) {
      const [a, b] = word.source_span;
      const last = koe.spokenWords.at(-1);
      if (!last || last.index !== s.index || last.span[0] !== a) {
        koe.spokenWords.push({ index: s.index, word: word.word, span: [a, b] });
      }
      parts.push([kind, koe.answer.slice(s.span[0], a)], ["current word", koe.answer.slice(a, b)],
        [kind, koe.answer.slice(b, s.span[1])]);
    } else {
      parts.push([kind, koe.answer.slice(s.span[0], s.span[1])]);
    }
    at = s.span[1];
  });
  parts.push(["pending", koe.answer.slice(at)]);
  $("transcript").replaceChildren(...parts.filter(([, t]) => t).map(([kind, t]) => {
    const span = document.createElement("span");
    span.className = kind;
    span.textContent = t;
    return span;
  }));
  $("level").style.width = `${Math.min(100, Math.round(Math.sqrt(koe.level) * 200))}%`;
  const end = Math.max(1, ...MARKS.map((m) => koe.timings[m] ?? 0));
  const dots = [];
  for (const row of document.querySelectorAll(".timings tr")) {
    const value = koe.timings[row.dataset.mark];
    row.querySelector("td").textContent = value === undefined ? "—" : `${value} ms`;
    if (value !== undefined) {
      const dot = document.createElement("span");
      dot.className = `mark ${row.dataset.mark === "firstAudioPlayed" ? "audio" : row.dataset.mark === "lastAudio" ? "last" : ""}`;
      dot.style.left = `${(value / end) * 100}%`;
      dot.title = `${row.querySelector("th").textContent}: ${value} ms`;
      dots.push(dot);
    }
  }
  $("track").replaceChildren(...dots);
  $("stalls").textContent = koe.timings.firstAudioPlayed === undefined ? ""
    : koe.stalls === 0 ? "no gaps in playback" : `${koe.stalls} gap(s) in playback`;
}

$("form").addEventListener("submit", go);
$("stop").addEventListener("click", stop);
for (const tab of document.querySelectorAll("[role=tab]")) tab.addEventListener("click", () => setMode(tab.dataset.mode));
$("rate").addEventListener("input", () => { $("rate-out").textContent = $("rate").value; });
$("speed").addEventListener("input", () => { $("speed-out").textContent = Number($("speed").value).toFixed(1); });
connect().catch((error) => status(`cannot reach the agent: ${error}`));
