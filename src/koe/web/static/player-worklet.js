// The AudioWorklet side of gapless playback: one queue of PCM chunks, played back to back.
//
// Chunks arrive from the page as Float32Array (mono, at the context's rate). The processor copies from
// the queue into each 128-frame render quantum across chunk boundaries, so consecutive chunks join without
// a gap or a click. It reports back: "started" when the turn's first sample is played, "progress" about
// every 50 ms (samples played, samples queued, level), and "drained" when the queue runs dry.

const PROGRESS_EVERY_FRAMES = 1200; // 50 ms at 24 kHz

class KoePlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.queue = [];
    this.offset = 0; // read position in queue[0]
    this.queued = 0; // samples waiting
    this.played = 0; // samples of the current turn played
    this.underruns = 0; // render quanta that ran dry while the turn still expected audio
    this.playing = false;
    this.sinceProgress = 0;
    this.level = 0;
    this.port.onmessage = (event) => this.onMessage(event.data);
  }

  onMessage(message) {
    if (message.type === "push") {
      this.queue.push(message.samples);
      this.queued += message.samples.length;
      this.port.postMessage({ type: "queued", queued: this.queued });
    } else if (message.type === "clear") {
      // Stop: everything queued is dropped at once, the counters start again for the next turn.
      this.queue = [];
      this.offset = 0;
      this.queued = 0;
      this.played = 0;
      this.underruns = 0;
      this.playing = false;
      this.level = 0;
      this.port.postMessage({ type: "cleared", time: currentTime });
    }
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    let written = 0;
    while (written < out.length && this.queue.length > 0) {
      const chunk = this.queue[0];
      const n = Math.min(out.length - written, chunk.length - this.offset);
      out.set(chunk.subarray(this.offset, this.offset + n), written);
      written += n;
      this.offset += n;
      if (this.offset === chunk.length) {
        this.queue.shift();
        this.offset = 0;
      }
    }
    out.fill(0, written);
    let energy = 0;
    for (let i = 0; i < written; i++) energy += out[i] * out[i];
    this.level = written > 0 ? Math.sqrt(energy / out.length) : 0;
    if (written > 0 && !this.playing) {
      this.playing = true;
      if (this.played === 0) this.port.postMessage({ type: "started", time: currentTime });
    }
    this.played += written;
    this.queued -= written;
    if (this.playing && written < out.length) {
      this.playing = false;
      this.underruns += 1;
      this.port.postMessage({ type: "drained", played: this.played, time: currentTime });
    }
    this.sinceProgress += out.length;
    if (this.sinceProgress >= PROGRESS_EVERY_FRAMES) {
      this.sinceProgress = 0;
      this.port.postMessage({
        type: "progress", played: this.played, queued: this.queued, level: this.level,
        underruns: this.underruns,
      });
    }
    return true;
  }
}

registerProcessor("koe-player", KoePlayer);
