// AvatarClient: connect a <video> element to an avatar-server session.
// An ES module with no build step: import { AvatarClient } from "/web/avatar-client.js".

/** @typedef {{baseUrl?: string, avatar?: string, mode?: string, iceServers?: RTCIceServer[]}} AvatarClientOptions */

export class AvatarClient extends EventTarget {
  /** @param {AvatarClientOptions} [options] */
  constructor(options = {}) {
    super();
    this.baseUrl = (options.baseUrl || "").replace(/\/$/, "");
    this.avatar = options.avatar || "default";
    this.mode = options.mode || "tts";
    this.iceServers = options.iceServers || [];
    this.sessionId = null;
    this.pc = null;
    this.ws = null;
  }

  /** Create a session and play it in `video`. Resolves once the answer is applied. */
  async connect(video) {
    const pc = new RTCPeerConnection({ iceServers: this.iceServers });
    this.pc = pc;
    pc.addTransceiver("video", { direction: "recvonly" });
    pc.addTransceiver("audio", { direction: "recvonly" });
    const stream = new MediaStream();
    pc.ontrack = (ev) => {
      stream.addTrack(ev.track);
      video.srcObject = stream;
    };
    pc.onconnectionstatechange = () =>
      this._emit("connectionstatechange", { state: pc.connectionState });
    await pc.setLocalDescription(await pc.createOffer());
    await iceGatheringComplete(pc);
    const res = await fetch(`${this.baseUrl}/v1/sessions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ sdp: pc.localDescription.sdp, type: "offer", avatar: this.avatar, mode: this.mode }),
    });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error ? body.error.message : `HTTP ${res.status}`);
    this.sessionId = body.session_id;
    this._openEvents();
    await pc.setRemoteDescription({ type: "answer", sdp: body.sdp });
  }

  /** Speak `text`; resolves to the utterance id. */
  async speak(text) {
    const body = await this._post("speak", { text });
    return body.utterance_id;
  }

  async interrupt() {
    await this._post("interrupt");
  }

  async disconnect() {
    if (this.ws) this.ws.close();
    if (this.sessionId) {
      await fetch(`${this.baseUrl}/v1/sessions/${this.sessionId}`, { method: "DELETE" }).catch(() => {});
    }
    if (this.pc) this.pc.close();
    this.sessionId = this.pc = this.ws = null;
  }

  async _post(action, payload) {
    if (!this.sessionId) throw new Error("not connected");
    const res = await fetch(`${this.baseUrl}/v1/sessions/${this.sessionId}/${action}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: payload ? JSON.stringify(payload) : undefined,
    });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(body.error ? body.error.message : `HTTP ${res.status}`);
    return body;
  }

  _openEvents() {
    const url = new URL(`${this.baseUrl || location.origin}/v1/sessions/${this.sessionId}/events`, location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    this.ws = new WebSocket(url);
    this.ws.onmessage = (msg) => {
      const event = JSON.parse(msg.data);
      this._emit(event.type, event);
    };
  }

  _emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }
}

function iceGatheringComplete(pc) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      if (pc.iceGatheringState === "complete") {
        pc.removeEventListener("icegatheringstatechange", done);
        resolve();
      }
    };
    pc.addEventListener("icegatheringstatechange", done);
    setTimeout(resolve, 2000); // host candidates are enough on a LAN; don't hang on a slow STUN
  });
}
