// Gapless PCM16 playback through an AudioWorklet (no <audio> element, no per-chunk scheduling).
//
// The AudioContext runs at the server's rate (24 kHz), so samples go to the worklet unconverted apart
// from int16 → float. Browsers only start audio after a user gesture: ensure() is called from a click.

export class Player {
  constructor(sampleRate, handlers) {
    this.sampleRate = sampleRate;
    this.handlers = handlers; // { started, progress, drained }
    this.context = null;
    this.node = null;
    this.pushed = 0; // samples pushed for the current turn
  }

  async ensure() {
    if (this.context === null) {
      this.context = new AudioContext({ sampleRate: this.sampleRate, latencyHint: "interactive" });
      await this.context.audioWorklet.addModule(new URL("./player-worklet.js", import.meta.url));
      this.node = new AudioWorkletNode(this.context, "koe-player", { outputChannelCount: [1] });
      this.node.port.onmessage = (event) => this.onMessage(event.data);
      this.node.connect(this.context.destination);
    }
    if (this.context.state !== "running") await this.context.resume();
  }

  onMessage(message) {
    const handler = this.handlers[message.type];
    if (handler) handler(message);
  }

  // Queue little-endian PCM16 bytes; returns the number of samples queued.
  push(buffer) {
    const pcm = new Int16Array(buffer);
    const samples = new Float32Array(pcm.length);
    for (let i = 0; i < pcm.length; i++) samples[i] = pcm[i] / 32768;
    this.node.port.postMessage({ type: "push", samples }, [samples.buffer]); // detaches samples: length 0
    this.pushed += pcm.length;
    return pcm.length;
  }

  // Drop everything queued at once (Stop, or the next turn).
  clear() {
    this.pushed = 0;
    if (this.node) this.node.port.postMessage({ type: "clear" });
  }
}
