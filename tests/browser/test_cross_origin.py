"""The README's embed snippet in a web app served from another origin, as users embed it."""

from __future__ import annotations

import pytest
import pytest_asyncio
from aiohttp import web

from testkit.server import ServerProcess, free_port

pytestmark = pytest.mark.browser

# The README's snippet, with listeners a page would add for what it shows its user.
APP = """<!doctype html><html><body><video autoplay playsinline muted width="512" height="512"></video>
<script type="module">
  import { AvatarClient } from "SERVER/web/avatar-client.js";
  window.__events = [];
  const avatar = new AvatarClient({ baseUrl: "SERVER" });
  for (const type of ["first_frame", "speak_started", "error"]) {
    avatar.addEventListener(type, (e) => window.__events.push({ type, ...e.detail }));
  }
  try {
    await avatar.connect(document.querySelector("video"));
    await avatar.speak("Hello!");
  } catch (err) {
    window.__failed = err.code;
  }
</script></body></html>"""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def app_origin():
    """Another origin (the same host, another port) whose page embeds the client; it serves the
    page for whichever server `?server=` names."""
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=APP.replace("SERVER", request.query["server"]), content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.fixture(scope="module")
def allowing(app_origin):
    with ServerProcess(env={"AVATAR_ALLOWED_ORIGINS": app_origin}) as proc:
        yield proc


async def open_app(browser, origin: str, server_url: str):
    context = await browser.new_context()
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(30_000)
    await page.goto(f"{origin}/?server={server_url}")
    return context, page, errors


async def test_the_snippet_connects_and_speaks_where_the_origin_is_allowed(browser, app_origin, allowing):
    context, page, errors = await open_app(browser, app_origin, allowing.url)
    try:
        await page.wait_for_function("() => window.__events.some((e) => e.type === 'speak_started')")
        kinds = await page.evaluate("() => window.__events.map((e) => e.type)")
        assert "first_frame" in kinds and "error" not in kinds and not errors
    finally:
        await context.close()


async def test_a_page_of_an_origin_not_allowed_gets_a_readable_error(browser, app_origin, server):
    """The session server allows no other origin: the client still loads, and says why it cannot connect."""
    context, page, errors = await open_app(browser, app_origin, server.url)
    try:
        await page.wait_for_function("() => window.__failed !== undefined")
        failed = await page.evaluate("() => [window.__failed, window.__events.filter((e) => e.type === 'error')]")
        code, shown = failed
        assert code == "origin_not_allowed" and [e["code"] for e in shown] == ["origin_not_allowed"]
        assert "AVATAR_ALLOWED_ORIGINS" in shown[0]["message"] and not errors
    finally:
        await context.close()
