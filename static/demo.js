// The demo page: pick an avatar (or upload a photo), pick a mode, connect, talk.
import { AvatarClient, listAvatars, uploadAvatar } from "/web/avatar-client.js";

const $ = (id) => document.getElementById(id);
let client = null;

function status(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

function setConnected(on) {
  $("connect").textContent = on ? "Disconnect" : "Connect";
  $("speak").disabled = $("interrupt").disabled = !on;
  $("mic").disabled = !on || $("mode").value === "tts";
  $("stats").hidden = !on;
  $("placeholder").hidden = on;
}

function addTranscript(role, text) {
  const li = document.createElement("li");
  li.className = role;
  li.innerHTML = `<b>${role === "user" ? "You" : "Avatar"}</b>`;
  li.append(text);
  $("transcript").append(li);
  li.scrollIntoView({ block: "nearest" });
}

// The screen takes the stream's shape: square by default, 16:9 where the server streams 1280x720
$("video").addEventListener("resize", () => {
  const v = $("video");
  if (v.videoWidth && v.videoHeight) v.parentElement.style.aspectRatio = `${v.videoWidth} / ${v.videoHeight}`;
});

async function loadAvatars(select) {
  const avatars = await listAvatars();
  const label = (a) => (a.default ? "Default" : `${a.kind === "video" ? "Video" : "Photo"} ${a.avatar_id.slice(0, 6)}`);
  $("avatar").replaceChildren(...avatars.filter((a) => a.status === "ready").map((a) => new Option(label(a), a.avatar_id)));
  if (select) $("avatar").value = select;
}

function wire(c) {
  c.addEventListener("first_frame", (e) => {
    $("s-ttff").textContent = `${e.detail.ttff_ms} ms`;
    status("Connected");
  });
  c.addEventListener("stats", (e) => {
    const s = e.detail;
    $("s-fps").textContent = (s.client_fps || s.fps).toFixed(0);
    $("s-av").textContent = `${Math.round(s.av_offset_ms)} ms`;
    if (s.latency_ms != null) $("s-lat").textContent = `${Math.round(s.latency_ms + s.queue_ms)} ms`;
  });
  c.addEventListener("speak_started", () => status("Speaking…"));
  c.addEventListener("speak_ended", (e) => { if (!e.detail.interrupted) status("Listening"); });
  c.addEventListener("interrupted", () => status("Interrupted"));
  c.addEventListener("transcript", (e) => e.detail.final && addTranscript(e.detail.role, e.detail.text));
  c.addEventListener("error", (e) => status(e.detail.message, true));
  c.addEventListener("connectionstatechange", (e) => {
    if (e.detail.state === "reconnecting") status(`Connection lost, reconnecting (${e.detail.attempt})…`);
  });
}

async function connect() {
  $("connect").disabled = true;
  status("Connecting…");
  const { iceServers } = await fetch("/v1/ice").then((r) => r.json()).catch(() => ({ iceServers: [] }));
  client = new AvatarClient({ avatar: $("avatar").value, mode: $("mode").value, iceServers });
  wire(client);
  try {
    await client.connect($("video"));
    setConnected(true);
    if ($("mode").value !== "tts") await toggleMic(true);
  } catch (err) {
    status(`Could not connect: ${err.message}`, true);
    client = null;
  } finally {
    $("connect").disabled = false;
  }
}

async function disconnect() {
  if (client) await client.disconnect();
  client = null;
  setConnected(false);
  $("mic").setAttribute("aria-pressed", "false");
  $("mic").textContent = "Microphone off";
  status("Disconnected");
}

async function toggleMic(on) {
  try {
    if (on) await client.startMicrophone();
    else await client.stopMicrophone();
    $("mic").setAttribute("aria-pressed", String(on));
    $("mic").textContent = on ? "Microphone on" : "Microphone off";
  } catch (err) {
    status(`Microphone: ${err.message}`, true);
  }
}

$("connect").onclick = () => (client ? disconnect() : connect());
$("speak-form").onsubmit = (ev) => {
  ev.preventDefault();
  const text = $("text").value.trim();
  if (client && text) client.speak(text).catch((err) => status(err.message, true));
};
$("interrupt").onclick = () => client && client.interrupt().catch((err) => status(err.message, true));
$("mic").onclick = () => client && toggleMic($("mic").getAttribute("aria-pressed") !== "true");
$("mode").onchange = async () => {
  if (client) {
    await disconnect();
    await connect(); // the mode is chosen when the session starts
  }
};
$("avatar").onchange = $("mode").onchange;
$("upload").onchange = async () => {
  const file = $("upload").files[0];
  if (!file) return;
  const what = (file.type || "").startsWith("video/") || /\.(mp4|mov|webm)$/i.test(file.name) ? "Clip" : "Photo";
  status(what === "Clip" ? "Uploading your clip…" : "Analysing your photo…");
  const onProgress = (share, stage) => {
    $("progress").hidden = false;
    $("progress").value = share;
    status(`Preparing your video avatar: ${Math.round(share * 100)}% (${stage})`);
  };
  try {
    const id = await uploadAvatar(file, { onProgress });
    await loadAvatars(id);
    status(`${what} ready. Connect to use it.`);
    if (client) await $("avatar").onchange();
  } catch (err) {
    status(`${what} refused: ${err.message}`, true);
  } finally {
    $("upload").value = "";
    $("progress").hidden = true;
  }
};

loadAvatars().catch((err) => status(`Server unreachable: ${err.message}`, true));
