// AvatarClient: play an avatar-server session in a <video> element.
// A plain ES module, no build step:
//   import { AvatarClient } from "avatar-server-client";  // npm; or "https://your-server/web/avatar-client.js"
//   const avatar = new AvatarClient({ baseUrl: "https://your-server" });
//   await avatar.connect(document.querySelector("video"));
//   const id = await avatar.speak("Hello!");  // accepted (queued), not yet spoken
//   await avatar.spoken(id);                    // its speak_ended: played through, or cut
// Types: avatar-client.d.ts beside this file.

/**
 * @typedef {Object} AvatarClientOptions
 * @property {string} [baseUrl]  server origin; default: the page's origin
 * @property {string} [avatar]   avatar id from GET /v1/avatars; default "default"
 * @property {"tts"|"mirror"|"chat"} [mode]  default "tts"
 * @property {RTCIceServer[]} [iceServers]  STUN/TURN servers; default none (LAN / same host)
 * @property {RTCIceTransportPolicy} [iceTransportPolicy]  "relay" forces TURN; default "all"
 * @property {string} [token]    bearer token, when the server requires one
 * @property {number} [connectTimeoutMs]  give up connecting after this long; default 10000
 * @property {number} [reconnects]  automatic reconnects after a dropped connection; default 3
 */

const STATS_PERIOD_MS = 1000;
const ENDED_KEPT = 64;  // the latest utterances' speak_ended, for spoken() asked after the fact

export class AvatarClient extends EventTarget {
  /** @param {AvatarClientOptions} [options] */
  constructor(options = {}) {
    super();
    this.baseUrl = (options.baseUrl || globalThis.location?.origin || "").replace(/\/$/, "");
    this.avatar = options.avatar || "default";
    this.mode = options.mode || "tts";
    this.iceServers = options.iceServers || [];
    this.iceTransportPolicy = options.iceTransportPolicy || "all";
    this.token = options.token || null;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10000;
    this.reconnects = options.reconnects ?? 3;
    /** @type {string|null} */ this.sessionId = null;
    /** @type {RTCPeerConnection|null} */ this.pc = null;
    /** @type {WebSocket|null} */ this.ws = null;
    /** @type {MediaStreamTrack|null} */ this.microphone = null;
    this._video = null;
    this._audioSender = null;
    this._closing = false;
    this._statsTimer = null;
    this._connectStarted = 0;
    // A closing tab ends its session at once instead of leaving it to time out.
    globalThis.addEventListener?.("pagehide", () => {
      this._unloading = true;
      this._teardown(true);
    });
    /** Milliseconds from connect() to the first frame shown, once known. */
    this.firstFrameMs = null;
    this.serverFirstFrameMs = null;
    /** @type {Map<string, object>} */ this._ended = new Map();
  }

  /**
   * Create a session and play it in `video`. Resolves when media flows; rejects with
   * a readable Error if the connection cannot be made.
   * @param {HTMLVideoElement} video
   */
  async connect(video) {
    this._video = video;
    this._closing = false;
    this._connectStarted = performance.now();
    try {
      await this._open();
    } catch (err) {
      // an `error` event too, so a page that listens for them shows why (a page of an origin
      // the server does not allow gets `origin_not_allowed`; a server it cannot reach, `unreachable`)
      this._emit("error", { code: err.code || "connect_failed", message: err.message });
      throw err;
    }
  }

  /**
   * Queue `text` to be spoken. Resolves with its utterance id as soon as the server has
   * accepted it, before any of it plays: `speak_started` / `speak_ended` events carry that
   * id, and `spoken(id)` waits for its end.
   * @param {string} text  @returns {Promise<string>} the utterance id
   */
  async speak(text) {
    return (await this._post("speak", { text })).utterance_id;
  }

  /**
   * Resolves with an utterance's `speak_ended` detail (`interrupted`: whether it was cut)
   * once it has played through or been cut; every accepted utterance gets one.
   * @param {string} utteranceId  @returns {Promise<{utterance_id: string, interrupted: boolean}>}
   */
  spoken(utteranceId) {
    if (this._ended.has(utteranceId)) return Promise.resolve(this._ended.get(utteranceId));
    return new Promise((resolve) => {
      const ended = (ev) => {
        if (ev.detail.utterance_id !== utteranceId) return;
        this.removeEventListener("speak_ended", ended);
        resolve(ev.detail);
      };
      this.addEventListener("speak_ended", ended);
    });
  }

  async interrupt() {
    await this._post("interrupt");
  }

  /** Send the microphone to the server (mirror and chat modes listen to it). */
  async startMicrophone() {
    if (!this._audioSender) throw new Error("connect first");
    if (!this.microphone) {
      const stream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true },
      });
      this.microphone = stream.getAudioTracks()[0];
    }
    await this._audioSender.replaceTrack(this.microphone);
  }

  async stopMicrophone() {
    if (this._audioSender) await this._audioSender.replaceTrack(null);
    if (this.microphone) this.microphone.stop();
    this.microphone = null;
  }

  async disconnect() {
    this._closing = true;
    await this.stopMicrophone();
    await this._teardown(true);
  }

  // --- connection ------------------------------------------------------------
  async _open() {
    const pc = new RTCPeerConnection({ iceServers: this.iceServers, iceTransportPolicy: this.iceTransportPolicy });
    this.pc = pc;
    pc.addTransceiver("video", { direction: "recvonly" });
    this._audioSender = pc.addTransceiver("audio", { direction: "sendrecv" }).sender;
    if (this.microphone) await this._audioSender.replaceTrack(this.microphone);
    const stream = new MediaStream();
    pc.ontrack = (ev) => {
      stream.addTrack(ev.track);
      this._video.srcObject = stream;
      if (ev.track.kind === "video") this._armFirstFrame();
    };
    const connected = this._watchConnection(pc);
    await pc.setLocalDescription(await pc.createOffer());
    await iceGatheringComplete(pc);
    const res = await fetch(`${this.baseUrl}/v1/sessions`, {
      method: "POST",
      headers: this._headers(),
      body: JSON.stringify({ sdp: pc.localDescription.sdp, type: "offer", avatar: this.avatar, mode: this.mode }),
    }).catch((err) => {
      pc.close();
      throw new AvatarError("unreachable", `cannot reach ${this.baseUrl || "the server"} from this page (${err.message})`);
    });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) {
      pc.close();
      throw new AvatarError(body.error?.code || `http_${res.status}`, body.error?.message || `HTTP ${res.status}`);
    }
    this.sessionId = body.session_id;
    this._openEvents();
    await pc.setRemoteDescription({ type: "answer", sdp: body.sdp });
    await connected;
    this._startStats();
  }

  /** Resolves once ICE connects; rejects with a clear error when it cannot. */
  _watchConnection(pc) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        if (pc.connectionState !== "connected") {
          const err = this._unreachable(pc);
          this._teardown(true);
          reject(err);
        }
      }, this.connectTimeoutMs);
      pc.addEventListener("connectionstatechange", () => {
        const state = pc.connectionState;
        this._emit("connectionstatechange", { state });
        if (state === "connected") {
          clearTimeout(timer);
          resolve();
        } else if (state === "failed" && pc === this.pc) {
          clearTimeout(timer);
          this._onDrop(reject);
        }
      });
    });
  }

  _unreachable(pc) {
    const relay = this.iceServers.some((s) => [].concat(s.urls).some((u) => String(u).startsWith("turn")));
    const hint = relay
      ? "the TURN server did not give a working relay candidate; check its address and credentials"
      : "no relay candidate, check TURN: peers behind NAT or firewalls need iceServers with a TURN server";
    return new AvatarError("ice_failed", `could not connect (${pc.connectionState}): ${hint}`);
  }

  async _onDrop(rejectFirst) {
    const wasConnected = this._video && this._video.srcObject && this.sessionId;
    await this._teardown(true);
    if (this._closing) return;
    if (!wasConnected || this.reconnects <= 0) {
      const err = this._unreachable({ connectionState: "failed" });
      if (wasConnected) this._emit("error", { code: err.code, message: err.message });  // else connect()'s to report
      rejectFirst(err);
      return;
    }
    for (let attempt = 1; attempt <= this.reconnects && !this._closing; attempt++) {
      this._emit("connectionstatechange", { state: "reconnecting", attempt });
      await sleep(500 * attempt);
      try {
        await this._open();
        return;
      } catch (err) {
        if (attempt === this.reconnects) this._emit("error", { code: err.code || "reconnect_failed", message: err.message });
      }
    }
  }

  async _teardown(deleteSession) {
    clearInterval(this._statsTimer);
    if (this.ws) this.ws.close();
    if (deleteSession && this.sessionId) {
      const url = `${this.baseUrl}/v1/sessions/${this.sessionId}`;
      const done = fetch(url, { method: "DELETE", headers: this._headers(), keepalive: true }).catch(() => {});
      // Delete before closing the peer: a closed peer ends the session on its own, and a
      // DELETE arriving after that would find nothing to delete.
      if (!this._unloading) await done;
    }
    if (this.pc) this.pc.close();
    this.sessionId = this.pc = this.ws = null;
  }

  // --- events and stats -----------------------------------------------------
  _openEvents() {
    const url = new URL(`${this.baseUrl}/v1/sessions/${this.sessionId}/events`);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    if (this.token) url.searchParams.set("token", this.token);
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.onmessage = (msg) => {
      const event = JSON.parse(msg.data);
      if (event.type === "first_frame") {
        this.serverFirstFrameMs = event.ttff_ms; // the browser's own first_frame follows
        return;
      }
      if (event.type === "stats") Object.assign(event, this._clientStats || {});
      if (event.type === "speak_ended") this._remember(event);
      this._emit(event.type, event);
    };
  }

  _remember(ended) {
    this._ended.set(ended.utterance_id, ended);
    if (this._ended.size > ENDED_KEPT) this._ended.delete(this._ended.keys().next().value);
  }

  _startStats() {
    clearInterval(this._statsTimer);
    this._statsTimer = setInterval(() => this._pollStats(), STATS_PERIOD_MS);
  }

  async _pollStats() {
    if (!this.pc) return;
    const report = await this.pc.getStats();
    const stats = { client_fps: 0, rtt_ms: null, jitter_buffer_ms: null, connect_to_first_frame_ms: this.firstFrameMs };
    report.forEach((s) => {
      if (s.type === "inbound-rtp" && s.kind === "video") {
        stats.client_fps = s.framesPerSecond || 0;
        if (s.jitterBufferEmittedCount) stats.jitter_buffer_ms = (1000 * s.jitterBufferDelay) / s.jitterBufferEmittedCount;
      }
      if (s.type === "candidate-pair" && s.nominated && s.currentRoundTripTime != null) {
        stats.rtt_ms = 1000 * s.currentRoundTripTime;
      }
    });
    stats.latency_ms = (stats.rtt_ms || 0) / 2 + (stats.jitter_buffer_ms || 0);
    this._clientStats = stats;
  }

  /** Emits `first_frame` when the video element presents its first decoded frame. */
  _armFirstFrame() {
    const video = this._video;
    const shown = () => {
      this.firstFrameMs = performance.now() - this._connectStarted;
      this._emit("first_frame", {
        type: "first_frame", session_id: this.sessionId, t: Date.now() / 1000,  // t: this page's clock
        ttff_ms: Math.round(this.firstFrameMs), server_ttff_ms: this.serverFirstFrameMs,
      });
    };
    if ("requestVideoFrameCallback" in video) video.requestVideoFrameCallback(shown);
    else video.addEventListener("loadeddata", shown, { once: true });
  }

  _emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  // --- http -------------------------------------------------------------------
  _headers() {
    const headers = { "Content-Type": "application/json" };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    return headers;
  }

  async _post(action, payload) {
    if (!this.sessionId) throw new AvatarError("not_connected", "not connected");
    const res = await fetch(`${this.baseUrl}/v1/sessions/${this.sessionId}/${action}`, {
      method: "POST",
      headers: this._headers(),
      body: payload ? JSON.stringify(payload) : undefined,
    });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new AvatarError(body.error?.code || `http_${res.status}`, body.error?.message || `HTTP ${res.status}`);
    return body;
  }
}

/** An error with the server's (or the client's) error code. */
export class AvatarError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/**
 * Upload a portrait (PNG or JPEG); resolves to its avatar id.
 * @param {Blob} image  @param {{baseUrl?: string, token?: string}} [options]
 */
export async function uploadAvatar(file, options = {}) {
  const video = isVideo(file);
  const form = new FormData();
  form.append(video ? "video" : "image", file, file.name || (video ? "clip.mp4" : "portrait"));
  const body = await avatarsApi("", options, { method: "POST", body: form });
  if (video && body.status !== "ready") await waitForAvatar(body.avatar_id, options);
  return body.avatar_id;
}

/** A video avatar is prepared after its upload: poll until it is ready (onProgress(share, stage) meanwhile). */
export async function waitForAvatar(avatarId, options = {}) {
  for (;;) {
    const body = await avatarsApi(`/${encodeURIComponent(avatarId)}`, options);
    if (body.status === "ready") return body;
    if (body.status === "failed") throw new AvatarError("avatar_failed", body.reason || "the clip could not be prepared");
    options.onProgress?.(body.progress ?? 0, body.stage || "preparing");
    await sleep(options.pollMs ?? 500);
  }
}

function isVideo(file) {
  return (file.type || "").startsWith("video/") || /\.(mp4|mov|webm|m4v|mkv)$/i.test(file.name || "");
}

/** @returns {Promise<{avatar_id: string, kind: string, status: string, default: boolean}[]>} */
export async function listAvatars(options = {}) {
  return avatarsApi("", options);
}

/** One call to /v1/avatars{path}, with the bearer token where `options.token` holds one; an
 * AvatarError (the server's code and sentence) when it is refused. */
async function avatarsApi(path, options, init = {}) {
  const baseUrl = (options.baseUrl || globalThis.location?.origin || "").replace(/\/$/, "");
  const headers = options.token ? { Authorization: `Bearer ${options.token}` } : {};
  const res = await fetch(`${baseUrl}/v1/avatars${path}`, { ...init, headers });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new AvatarError(body.error?.code || `http_${res.status}`, body.error?.message || `HTTP ${res.status}`);
  return body;
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
    setTimeout(resolve, 2000); // host candidates are enough on a LAN; don't wait on a slow STUN
  });
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
