// Types for avatar-client.js (an ES module served at /web/avatar-client.js).

export interface AvatarClientOptions {
  /** Server origin; default: the page's origin. */
  baseUrl?: string;
  /** Avatar id from GET /v1/avatars; default "default". */
  avatar?: string;
  /** "tts" speaks what it is told; "mirror" lip-syncs the microphone; "chat" answers through an LLM. */
  mode?: "tts" | "mirror" | "chat";
  /** STUN/TURN servers; default none (same host or LAN). */
  iceServers?: RTCIceServer[];
  /** "relay" forces TURN; default "all". */
  iceTransportPolicy?: RTCIceTransportPolicy;
  /** Bearer token, when the server requires one. */
  token?: string;
  /** Give up connecting after this many milliseconds; default 10000. */
  connectTimeoutMs?: number;
  /** Automatic reconnects after a dropped connection; default 3. */
  reconnects?: number;
}

export interface AvatarEventMap {
  first_frame: CustomEvent<{ session_id: string; t: number; ttff_ms: number; server_ttff_ms: number | null }>;
  speak_started: CustomEvent<{ utterance_id: string; t: number }>;
  /** Every accepted utterance ends with one: played through, or cut (`interrupted`). */
  speak_ended: CustomEvent<{ utterance_id: string; interrupted: boolean; t: number }>;
  interrupted: CustomEvent<{ utterance_id: string; played_ms: number; t: number }>;
  playback_started: CustomEvent<{ utterance_id: string; t: number }>;
  playback_finished: CustomEvent<{ utterance_id: string; position_ms: number; interrupted: boolean; t: number }>;
  user_speech_started: CustomEvent<{ t: number }>;
  user_speech_ended: CustomEvent<{ silence_ms: number; t: number }>;
  broadcast_started: CustomEvent<{ url: string; target: string; t: number }>;
  broadcast_error: CustomEvent<{ url: string; target: string; reason: string; retry_in_s: number; status?: number; t: number }>;
  broadcast_stopped: CustomEvent<{ url: string; target: string; dropped_ticks?: number; t: number }>;
  transcript: CustomEvent<{ role: "user" | "avatar"; text: string; final: boolean; utterance_id?: string; t: number }>;
  stats: CustomEvent<{
    fps: number; fresh_fps: number; queue_ms: number; av_offset_ms: number; held: number; video_kbps: number;
    client_fps?: number; rtt_ms?: number | null; jitter_buffer_ms?: number | null; latency_ms?: number;
  }>;
  error: CustomEvent<{ code: string; message: string }>;
  connectionstatechange: CustomEvent<{ state: RTCPeerConnectionState | "reconnecting"; attempt?: number }>;
}

export declare class AvatarError extends Error {
  code: string;
}

export declare class AvatarClient extends EventTarget {
  constructor(options?: AvatarClientOptions);
  readonly sessionId: string | null;
  readonly firstFrameMs: number | null;
  connect(video: HTMLVideoElement): Promise<void>;
  /** Resolves with the utterance id once the server accepted the text, before it plays. */
  speak(text: string): Promise<string>;
  /** Resolves with the utterance's speak_ended (played through, or cut). */
  spoken(utteranceId: string): Promise<{ utterance_id: string; interrupted: boolean; t: number }>;
  interrupt(): Promise<void>;
  startMicrophone(): Promise<void>;
  stopMicrophone(): Promise<void>;
  disconnect(): Promise<void>;
  addEventListener<K extends keyof AvatarEventMap>(type: K, listener: (ev: AvatarEventMap[K]) => void, options?: boolean | AddEventListenerOptions): void;
}

export interface AvatarInfo {
  avatar_id: string;
  kind: "photo" | "video";
  status: "preparing" | "ready" | "failed";
  default?: boolean;
  progress?: number;
  stage?: string;
  reason?: string;
}
/** A photo (PNG/JPEG) or a clip (MP4/MOV/WebM): a clip resolves once its video avatar is ready. */
export declare function uploadAvatar(file: Blob & { name?: string }, options?: {
  baseUrl?: string; token?: string; onProgress?: (share: number, stage: string) => void; pollMs?: number;
}): Promise<string>;
export declare function waitForAvatar(avatarId: string, options?: {
  baseUrl?: string; token?: string; onProgress?: (share: number, stage: string) => void; pollMs?: number;
}): Promise<AvatarInfo>;
/** Rejects with an AvatarError (e.g. `unauthorized`) when the server refuses. */
export declare function listAvatars(options?: { baseUrl?: string; token?: string }): Promise<AvatarInfo[]>;
