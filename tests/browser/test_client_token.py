"""The JS client on a server that needs a token: every exported function carries it."""

from __future__ import annotations

import base64

import pytest
import pytest_asyncio

from testkit.server import ROOT, ServerProcess
from tests.browser.conftest import wait_playing

pytestmark = pytest.mark.browser
TOKEN = "browser-token-3f9a"

EVERY_EXPORT = """async ([token, photo]) => {
  const { AvatarClient, uploadAvatar, waitForAvatar, listAvatars } = await import("/web/avatar-client.js");
  const seen = {};
  seen.listed = (await listAvatars({ token })).map((a) => a.avatar_id);
  const bytes = Uint8Array.from(atob(photo), (c) => c.charCodeAt(0));
  const id = await uploadAvatar(new Blob([bytes], { type: "image/jpeg" }), { token });
  seen.ready = (await waitForAvatar(id, { token })).status;
  const client = new AvatarClient({ token, avatar: id });
  const started = new Promise((resolve) => client.addEventListener("speak_started", resolve, { once: true }));
  await client.connect(document.querySelector("video"));
  const first = await client.speak("Hi.");
  seen.first = await client.spoken(first);  // played through
  const second = await client.speak("Hello there, with a token, and a long sentence after it.");
  await started;
  await client.interrupt();
  seen.second = await client.spoken(second);  // cut
  seen.again = await client.spoken(first);  // asked after the fact
  seen.ids = [first, second];
  await client.disconnect();
  seen.spoke = true;
  try {
    await listAvatars();
    seen.without = "resolved";
  } catch (err) {
    seen.without = err.code;
  }
  return seen;
}"""


@pytest.fixture(scope="module")
def server():
    with ServerProcess(env={"AVATAR_TOKEN": TOKEN}) as proc:
        yield proc


@pytest_asyncio.fixture
async def token_page(browser, server):
    """A page on the token server; the one 401 the test asks for is the only console error allowed."""
    context = await browser.new_context(viewport={"width": 800, "height": 800})
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(30_000)
    await page.goto(server.url + "/healthz")  # an origin of the server's, not the demo page's script
    await page.set_content('<video autoplay playsinline muted width="512" height="512"></video>')
    yield page
    await context.close()
    assert [e for e in errors if "401" not in e] == [], errors


async def test_every_exported_function_carries_the_token(token_page):
    photo = base64.b64encode((ROOT / "tests/fixtures/portraits/young-man-glasses.jpg").read_bytes()).decode()
    seen = await token_page.evaluate(EVERY_EXPORT, [TOKEN, photo])
    assert "default" in seen["listed"]
    assert seen["ready"] == "ready" and seen["spoke"]
    first, second = seen["ids"]
    assert (seen["first"]["utterance_id"], seen["first"]["interrupted"]) == (first, False), seen
    assert (seen["second"]["utterance_id"], seen["second"]["interrupted"]) == (second, True), seen
    assert seen["again"] == seen["first"]
    assert seen["without"] == "unauthorized", "a refused list rejects with the server's code"


async def test_a_connected_token_client_plays(token_page):
    await token_page.evaluate("""async (token) => {
      const { AvatarClient } = await import("/web/avatar-client.js");
      window.__client = new AvatarClient({ token });
      await window.__client.connect(document.querySelector("video"));
    }""", TOKEN)
    await wait_playing(token_page)
    await token_page.evaluate("() => window.__client.disconnect()")
