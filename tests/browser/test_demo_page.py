"""The demo page in headless Chromium: connect, see the face, speak, interrupt, mirror, upload."""

from __future__ import annotations

import time

import cv2
import numpy as np
import pytest
import skimage.data

from engine.families.portrait.avatar import DEFAULT_AVATAR
from testkit.install import pack_client
from tests.browser.conftest import ARTIFACTS, video_delay_ms, video_frame, wait_playing
from tests.mouth import OPEN, dark_pixels

pytestmark = pytest.mark.browser
SETTLE_S = 0.8  # interrupt -> a shut mouth at the server: about 0.2 s (the lead, the motion's settling)


def face_difference(rgb: np.ndarray, reference_path) -> float:
    """Mean colour difference over the head at 32x32, so idle head motion barely counts:
    the portrait itself scores ~11, the same photo mirrored ~55."""
    ref = cv2.cvtColor(cv2.imread(str(reference_path)), cv2.COLOR_BGR2RGB)
    small = [cv2.resize(x, (32, 32), interpolation=cv2.INTER_AREA).astype(int) for x in (rgb, ref)]
    return float(np.abs(small[0] - small[1])[6:25, 7:25].mean())


async def mouth_track(page, seconds: float) -> list[int]:
    return [count for _, count in await timed_mouth_track(page, seconds)]


async def timed_mouth_track(page, seconds: float) -> list[tuple[float, int]]:
    """(seconds from now, dark mouth pixels) of the shown picture, every 60 ms or so."""
    track, start = [], time.monotonic()
    while time.monotonic() < start + seconds:
        track.append((round(time.monotonic() - start, 2), dark_pixels(await video_frame(page))))
        await page.wait_for_timeout(60)
    return track


async def connect(page) -> None:
    await page.get_by_test_id("connect").click()
    await wait_playing(page)
    await page.wait_for_function("() => document.querySelector('[data-testid=status]').textContent === 'Connected'")


async def test_connect_shows_the_face_speaks_and_interrupts(page):
    await connect(page)
    frame = await video_frame(page)
    cv2.imwrite(str(ARTIFACTS / "demo-connected.png"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    assert frame.shape == (512, 512, 3)
    assert face_difference(frame, DEFAULT_AVATAR) < 25, "the video does not show the avatar's face"
    silent = await mouth_track(page, 1.5)

    await page.get_by_test_id("speak-text").fill("Good morning! I am talking to you from inside this browser tab, "
                                            "and my lips move with every word I say.")
    await page.get_by_test_id("speak").click()
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=status]').textContent.startsWith('Speaking')")
    # From speak_started (the first frame of speech played) over 3.5 s of the 7 s sentence: the
    # span is counted from that event, so a slow first utterance is not judged before it plays.
    speaking = await mouth_track(page, 3.5)
    await page.screenshot(path=str(ARTIFACTS / "demo-speaking.png"))
    assert max(silent) < OPEN
    assert max(speaking) > OPEN and np.std(speaking) > 3 * np.std(silent) + 10, (silent, speaking)

    delay_ms = await video_delay_ms(page)
    await page.get_by_test_id("interrupt").click()
    await page.wait_for_function("() => document.querySelector('[data-testid=status]').textContent === 'Interrupted'")
    # What the page shows trails the server by the browser's own buffer: measured, not guessed.
    allowed = SETTLE_S + delay_ms / 1000
    track = await timed_mouth_track(page, allowed + 1.0)
    still_open = [t for t, count in track if count >= OPEN]
    assert not still_open or max(still_open) < allowed, \
        f"the mouth kept moving after the interrupt (browser delay {delay_ms:.0f} ms): {track}"
    assert await page.locator("[data-testid=transcript] li.avatar").count() == 1
    assert await page.get_by_test_id("stats").is_visible()


async def test_switch_to_mirror_mode_lip_syncs_the_fake_microphone(page):
    await connect(page)
    await page.get_by_test_id("mode").select_option("mirror")  # reconnects in the new mode
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=mic]').getAttribute('aria-pressed') === 'true'")
    await wait_playing(page)
    counts = await mouth_track(page, 4.0)  # jfk.flac plays in a loop into the fake microphone
    assert max(counts) > OPEN and np.std(counts) > 40, f"mouth did not follow the microphone: {counts}"


async def test_upload_a_portrait_and_connect_with_it(page):
    photo = ARTIFACTS / "upload-portrait.jpg"
    cv2.imwrite(str(photo), cv2.cvtColor(skimage.data.astronaut()[:, ::-1], cv2.COLOR_RGB2BGR))
    await page.get_by_test_id("upload").set_input_files(str(photo))
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=status]').textContent.startsWith('Photo ready')",
                           timeout=60_000)
    avatar_id = await page.get_by_test_id("avatar").input_value()
    assert avatar_id != "default"
    await connect(page)
    frame = await video_frame(page)
    cv2.imwrite(str(ARTIFACTS / "demo-uploaded.png"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    mirrored_default = cv2.imread(str(DEFAULT_AVATAR))[:, ::-1]
    cv2.imwrite(str(ARTIFACTS / "mirrored-default.png"), mirrored_default)
    # The uploaded photo is the astronaut mirrored: the picture must match that, not the default.
    assert face_difference(frame, ARTIFACTS / "mirrored-default.png") < 25 < face_difference(frame, DEFAULT_AVATAR)


async def test_embed_page_plays(page, server):
    await page.goto(server.url + "/static/embed.html")
    await wait_playing(page)
    assert face_difference(await video_frame(page), DEFAULT_AVATAR) < 25


# An app's page that imports the client by its npm name; the import map stands in for a bundler.
APP_PAGE = """<!doctype html><html><body><video autoplay playsinline width="512" height="512"></video>
<script type="importmap">
  {"imports": {"avatar-server-client": "/node_modules/avatar-server-client/avatar-client.js"}}
</script>
<script type="module">
  import { AvatarClient } from "avatar-server-client";
  await new AvatarClient().connect(document.querySelector("video"));
</script></body></html>"""


async def test_a_page_importing_the_packed_npm_client_plays(page, server, tmp_path):
    """`npm pack`'s tarball, unpacked as node_modules would hold it, is what the page imports."""
    package = pack_client(tmp_path)

    async def node_modules(route):
        name = route.request.url.split("/node_modules/avatar-server-client/", 1)[1]
        await route.fulfill(path=package / name, content_type="text/javascript")

    await page.route("**/node_modules/avatar-server-client/**", node_modules)
    # The page's document comes from the server (Chromium lets only a local page reach a
    # local server), then becomes the app's page.
    await page.goto(server.url + "/healthz")
    await page.set_content(APP_PAGE)
    await wait_playing(page)
    assert face_difference(await video_frame(page), DEFAULT_AVATAR) < 25


async def test_unreachable_connection_fails_with_a_clear_error(page):
    """Relay-only ICE with no TURN server can never connect: a readable error, no hang."""
    message = await page.evaluate("""async () => {
        const { AvatarClient } = await import('/web/avatar-client.js');
        const client = new AvatarClient({ iceTransportPolicy: 'relay', connectTimeoutMs: 3000, reconnects: 0 });
        try { await client.connect(document.createElement('video')); return 'connected?'; }
        catch (err) { return `${err.code}: ${err.message}`; }
    }""")
    assert message.startswith("ice_failed") and "TURN" in message


async def test_upload_a_clip_wait_for_it_then_speak_with_the_persons_face(page, server, tmp_path):
    """A clip of a real person: the page shows the preparation's progress, offers the new
    avatar, and the video shows that person (their own pixels, in the clip's framing) with a
    mouth that moves more while speaking than in silence."""
    from engine.families.video.tracking import frames_opening
    from tests.video import nearest_clip_frame_error, person_clip, prepared_crop

    clip = person_clip(tmp_path / "me-talking.mp4", seed=int(time.time()))
    await page.get_by_test_id("upload").set_input_files(str(clip))
    await page.wait_for_function("() => !document.querySelector('[data-testid=prepare-progress]').hidden",
                                 timeout=60_000)
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=status]').textContent.startsWith('Clip ready')", timeout=120_000)
    avatar_id = await page.get_by_test_id("avatar").input_value()
    assert avatar_id != "default"
    await connect(page)
    silent = [await video_frame(page) for _ in range(12)]
    cv2.imwrite(str(ARTIFACTS / "demo-video-avatar.png"), cv2.cvtColor(silent[0], cv2.COLOR_RGB2BGR))
    crop = prepared_crop(server.avatars_dir, avatar_id)
    assert nearest_clip_frame_error(silent[0], clip, crop) < 8, "the video does not show the person of the clip"
    assert face_difference(silent[0], DEFAULT_AVATAR) > 25
    await page.get_by_test_id("speak-text").fill("Papa bought a big blue map, and we all looked at it together.")
    await page.get_by_test_id("speak").click()
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=status]').textContent.startsWith('Speaking')")
    speaking = []
    for _ in range(25):
        speaking.append(await video_frame(page))
        await page.wait_for_timeout(60)
    opening_silent, opening_speaking = frames_opening(silent), frames_opening(speaking)
    assert np.std(opening_speaking) > 2 * np.std(opening_silent) + 0.005, (opening_silent, opening_speaking)
