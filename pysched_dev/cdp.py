"""A small Chrome DevTools Protocol client for browser tests: headless Chromium driven over its
DevTools WebSocket with aiohttp (no Selenium, no WebDriver, no Node).

Usage::

    async with Browser.launch(tmp_path) as browser:          # the browser is killed on exit
        page = await browser.new_page(width=1400, height=1000)
        await page.goto("http://127.0.0.1:8080/")
        t_ready = await page.wait_for("document.body.dataset.ready === '1'", timeout=60)
        await page.click("#run")
        await page.fill("#config-editor", "apiVersion: ...")
        rows = await page.evaluate("[...document.querySelectorAll('tr')].map(r => r.textContent)")
        await page.screenshot(tmp_path / "page.png")
        assert not page.errors, page.errors

What it does:

* :meth:`Browser.launch` starts ``$PYSCHED_CHROMIUM`` (else ``chromium`` / ``chromium-browser`` on
  PATH; :func:`find_chromium`) headless with a throw-away profile under the given directory and
  ``--remote-debugging-port=0``, reads the port Chromium picked from the profile's
  ``DevToolsActivePort`` file (or the ``DevTools listening on ws://...`` line on stderr, which goes to
  ``<dir>/chromium.log``), and connects to the browser target. The process runs in its own session
  and its group is killed (SIGKILL) when the context manager exits, whatever happened.
* :meth:`Browser.new_page` creates a page target and attaches to it with a flat session (one
  WebSocket for everything), enables the Page, Runtime and Log domains, and sets the viewport with
  ``Emulation.setDeviceMetricsOverride``.
* :class:`Page` records script errors in :attr:`Page.errors`: uncaught exceptions
  (``Runtime.exceptionThrown``), ``console.error`` calls (``Runtime.consoleAPICalled``) and browser log
  entries of level error (``Log.entryAdded``: failed resource loads, CSP violations...). Each is a
  dict ``{"kind", "text", "url"}``; :meth:`Page.script_errors` filters out what a test chooses to
  ignore.
* :meth:`Page.evaluate` runs an expression (promises are awaited) and returns its JSON value
  (``returnByValue``); a script exception raises :class:`CDPError`. :meth:`Page.wait_for` polls a
  condition *inside the page* and returns the page clock (``performance.now()``, ms since the
  navigation started) at which it first held, so it doubles as a timer.
* Interaction through the DOM: :meth:`Page.click` (``element.click()``, or real mouse events with
  ``mouse=True``), :meth:`Page.fill` (sets ``.value``, dispatches ``input`` and ``change``),
  :meth:`Page.select` (the same for a ``<select>``).
* Measurements: :meth:`Page.paint_timings` (``first-paint``, ``first-contentful-paint`` and the
  navigation timing marks, in ms since navigation start), :meth:`Page.metrics`
  (``Performance.getMetrics``), :meth:`Page.ping` (how long a trivial evaluation takes to answer:
  whether the page's main thread is responsive).
* :meth:`Page.screenshot` (``Page.captureScreenshot``, PNG, optionally the full page) and
  :meth:`Page.download` (clicks a link and waits for the file via ``Browser.setDownloadBehavior``).

Everything is loopback only; the client never talks to anything but the browser it started.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["Browser", "CDPError", "Page", "find_chromium"]

#: Chromium flags for a quiet, self-contained headless browser (as tests/e2e/test_report_render.py).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-extensions", "--disable-default-apps", "--mute-audio",
                  "--password-store=basic", "--use-mock-keychain", "--disable-dev-shm-usage",
                  "--enable-logging=stderr", "--v=0", "--hide-scrollbars")


class CDPError(RuntimeError):
    """A DevTools command failed, a script threw, or the browser went away."""


def find_chromium() -> str | None:
    """``$PYSCHED_CHROMIUM``, else ``chromium`` or ``chromium-browser`` on PATH, else None."""
    return (os.environ.get("PYSCHED_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or shutil.which("google-chrome"))


class _Connection:
    """One DevTools WebSocket: numbered commands answered by futures, events fanned out to listeners."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, session: aiohttp.ClientSession):
        self._ws = ws
        self._session = session
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        # (sessionId or None for the browser target) -> callbacks(method, params)
        self._listeners: dict[str | None, list[Callable[[str, dict], None]]] = {}
        self._closed: BaseException | None = None
        self._reader = asyncio.create_task(self._read(), name="cdp-reader")

    async def _read(self) -> None:
        try:
            async for msg in self._ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                data = json.loads(msg.data)
                if "id" in data:
                    fut = self._pending.pop(data["id"], None)
                    if fut is not None and not fut.done():
                        if "error" in data:
                            fut.set_exception(CDPError(f"{data['error'].get('message')} "
                                                       f"({data['error'].get('data', '')})".strip()))
                        else:
                            fut.set_result(data.get("result", {}))
                else:
                    for listener in list(self._listeners.get(data.get("sessionId"), ())):
                        listener(data["method"], data.get("params", {}))
            self._closed = CDPError("the browser closed the DevTools connection")
        except Exception as e:  # noqa: BLE001 - surfaced to every waiting command
            self._closed = CDPError(f"DevTools connection failed: {e!r}")
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(self._closed)
        self._pending.clear()

    async def send(self, method: str, params: dict | None = None, *, session_id: str | None = None,
                   timeout: float = 30.0) -> dict:
        if self._closed is not None:
            raise self._closed
        cid = next(self._ids)
        msg: dict[str, Any] = {"id": cid, "method": method, "params": params or {}}
        if session_id:
            msg["sessionId"] = session_id
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = fut
        await self._ws.send_str(json.dumps(msg))
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise CDPError(f"{method}: no answer within {timeout}s") from None
        finally:
            self._pending.pop(cid, None)

    def listen(self, session_id: str | None, callback: Callable[[str, dict], None]) -> None:
        self._listeners.setdefault(session_id, []).append(callback)

    def unlisten(self, session_id: str | None, callback: Callable[[str, dict], None]) -> None:
        with suppress(KeyError, ValueError):
            self._listeners[session_id].remove(callback)

    async def close(self) -> None:
        with suppress(Exception):
            await self._ws.close()
        self._reader.cancel()
        with suppress(BaseException):
            await self._reader
        await self._session.close()


class Page:
    """One page target (a tab), attached through a flat session of the browser's connection."""

    def __init__(self, browser: Browser, target_id: str, session_id: str):
        self.browser = browser
        self.target_id = target_id
        self.session_id = session_id
        #: Script errors seen so far: ``{"kind": "exception"|"console"|"log", "text", "url"}``.
        self.errors: list[dict] = []
        #: Every console message ``{"type", "text"}`` (all levels), for debugging a failing test.
        self.console: list[dict] = []
        self._waiters: list[tuple[str, asyncio.Future]] = []
        browser._conn.listen(session_id, self._on_event)

    # -- events --------------------------------------------------------------------------------

    def _on_event(self, method: str, params: dict) -> None:
        if method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            exc = d.get("exception") or {}
            text = exc.get("description") or d.get("text", "exception")
            self.errors.append({"kind": "exception", "text": text, "url": d.get("url", "")})
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(_remote_text(a) for a in params.get("args", []))
            self.console.append({"type": params.get("type"), "text": text})
            if params.get("type") in ("error", "assert"):
                frames = (params.get("stackTrace") or {}).get("callFrames") or [{}]
                self.errors.append({"kind": "console", "text": text, "url": frames[0].get("url", "")})
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.console.append({"type": f"log.{entry.get('level')}", "text": entry.get("text", "")})
            if entry.get("level") == "error":
                self.errors.append({"kind": "log", "text": f"{entry.get('source')}: {entry.get('text', '')}",
                                    "url": entry.get("url", "")})
        for name, fut in list(self._waiters):
            if name == method and not fut.done():
                fut.set_result(params)

    def _expect(self, method: str) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((method, fut))
        fut.add_done_callback(lambda f: self._waiters.remove((method, f)))
        return fut

    def script_errors(self, ignore: Callable[[dict], bool] | None = None) -> list[dict]:
        """:attr:`errors` without those ``ignore(error)`` is true for (e.g. a missing favicon)."""
        return [e for e in self.errors if not (ignore and ignore(e))]

    # -- commands ------------------------------------------------------------------------------

    async def send(self, method: str, params: dict | None = None, *, timeout: float = 30.0) -> dict:
        """A raw DevTools command on this page's session."""
        return await self.browser._conn.send(method, params, session_id=self.session_id, timeout=timeout)

    async def set_viewport(self, width: int, height: int, scale: float = 1.0) -> None:
        await self.send("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": False})

    async def goto(self, url: str, *, timeout: float = 60.0) -> None:
        """Navigate and wait for the load event (redirects are followed; a fragment-only change of the
        current URL loads nothing and returns at once)."""
        loaded = self._expect("Page.loadEventFired")
        result = await self.send("Page.navigate", {"url": url}, timeout=timeout)
        if result.get("errorText"):
            loaded.cancel()
            raise CDPError(f"navigating to {url}: {result['errorText']}")
        if not result.get("loaderId"):  # a same-document navigation (only the fragment changed): no load
            loaded.cancel()
            return
        try:
            await asyncio.wait_for(loaded, timeout)
        except TimeoutError:
            raise CDPError(f"{url}: no load event within {timeout}s") from None

    async def evaluate(self, expression: str, *, timeout: float = 30.0, await_promise: bool = True) -> Any:
        """The JSON value of a JavaScript expression in the page (a promise is awaited first)."""
        result = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                      "awaitPromise": await_promise, "userGesture": True},
                                 timeout=timeout)
        if "exceptionDetails" in result:
            d = result["exceptionDetails"]
            raise CDPError(f"script error: {(d.get('exception') or {}).get('description') or d.get('text')}\n"
                           f"in: {expression[:300]}")
        return result.get("result", {}).get("value")

    async def call(self, function: str, *args: Any, timeout: float = 30.0) -> Any:
        """``(function)(...args)`` in the page, the arguments passed as JSON: no quoting to get wrong."""
        return await self.evaluate(f"({function})(...{json.dumps(list(args))})", timeout=timeout)

    async def wait_for(self, condition: str, *, timeout: float = 30.0, interval_ms: int = 20) -> float:
        """Wait until the JavaScript expression ``condition`` is truthy; returns ``performance.now()``
        (ms since the navigation started) at the first poll that saw it true.

        The polling runs in the page (``setTimeout`` every ``interval_ms``), so the time is the page's
        own; a navigation that destroys the context is retried. Raises :class:`CDPError` on timeout.
        """
        deadline = time.monotonic() + timeout
        js = f"""new Promise((resolve, reject) => {{
            const until = performance.now() + {int(timeout * 1000)};
            const poll = () => {{
                let ok = false;
                try {{ ok = !!({condition}); }} catch (e) {{ ok = false; }}
                if (ok) return resolve(performance.now());
                if (performance.now() > until) return resolve(null);
                setTimeout(poll, {interval_ms});
            }};
            poll();
        }})"""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                t = await self.evaluate(js, timeout=left + 5)
            except CDPError as e:
                if "context" in str(e).lower() and time.monotonic() < deadline:  # navigated away meanwhile
                    await asyncio.sleep(0.05)
                    continue
                raise
            if t is not None:
                return float(t)
        raise CDPError(f"timed out after {timeout}s waiting for {condition!r}")

    async def wait_for_idle(self, *, timeout: float = 30.0) -> None:
        """Two animation frames: what the last DOM change looks like has been laid out and painted."""
        await self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))",
                            timeout=timeout)

    # -- interaction ---------------------------------------------------------------------------

    async def exists(self, selector: str) -> bool:
        return bool(await self.call("s => !!document.querySelector(s)", selector))

    async def click(self, selector: str, *, mouse: bool = False) -> None:
        """Click the first element matching ``selector``: ``element.click()``, or with ``mouse=True`` a
        real left click (``Input.dispatchMouseEvent``) at its centre after scrolling it into view."""
        if not mouse:
            ok = await self.call("s => { const e = document.querySelector(s); if (!e) return false; "
                                 "e.click(); return true; }", selector)
            if not ok:
                raise CDPError(f"click: no element matches {selector!r}")
            return
        box = await self.call("s => { const e = document.querySelector(s); if (!e) return null; "
                              "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
                              "return {x: r.left + r.width / 2, y: r.top + r.height / 2}; }", selector)
        if box is None:
            raise CDPError(f"click: no element matches {selector!r}")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", {"type": kind, "x": box["x"], "y": box["y"],
                                                         "button": "left", "clickCount": 1})

    async def fill(self, selector: str, value: str) -> None:
        """Set an input's or textarea's ``.value`` and dispatch ``input`` and ``change`` (as typing would)."""
        ok = await self.call("(s, v) => { const e = document.querySelector(s); if (!e) return false; "
                             "e.focus(); e.value = v; "
                             "e.dispatchEvent(new Event('input', {bubbles: true})); "
                             "e.dispatchEvent(new Event('change', {bubbles: true})); return true; }", selector, value)
        if not ok:
            raise CDPError(f"fill: no element matches {selector!r}")

    async def select(self, selector: str, value: str) -> None:
        """Choose the option with that value in a ``<select>`` (fails when there is none)."""
        ok = await self.call("(s, v) => { const e = document.querySelector(s); if (!e) return 'missing'; "
                             "if (![...e.options].some(o => o.value === v)) return 'no option'; "
                             "e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); "
                             "e.dispatchEvent(new Event('change', {bubbles: true})); return 'ok'; }", selector, value)
        if ok != "ok":
            raise CDPError(f"select {selector!r} = {value!r}: {ok}")

    async def scroll_into_view(self, selector: str, block: str = "start") -> None:
        """Scroll the first element matching ``selector`` into the viewport (before a screenshot)."""
        ok = await self.call("(s, b) => { const e = document.querySelector(s); if (!e) return false; "
                             "e.scrollIntoView({block: b}); return true; }", selector, block)
        if not ok:
            raise CDPError(f"scroll: no element matches {selector!r}")

    async def text(self, selector: str) -> str | None:
        return await self.call("s => { const e = document.querySelector(s); return e ? e.textContent : null; }",
                               selector)

    async def attribute(self, selector: str, name: str) -> str | None:
        return await self.call("(s, n) => { const e = document.querySelector(s); "
                               "return e ? e.getAttribute(n) : null; }", selector, name)

    # -- measurements --------------------------------------------------------------------------

    async def paint_timings(self) -> dict[str, float]:
        """``first-paint``, ``first-contentful-paint`` and the navigation marks (``responseEnd``,
        ``domContentLoaded``, ``load``) in ms since the navigation started (those that happened)."""
        return await self.evaluate("""(() => {
            const out = {};
            for (const e of performance.getEntriesByType('paint')) out[e.name] = e.startTime;
            const nav = performance.getEntriesByType('navigation')[0];
            if (nav) {
                out.responseEnd = nav.responseEnd;
                out.domContentLoaded = nav.domContentLoadedEventEnd;
                out.load = nav.loadEventEnd;
            }
            return out;
        })()""")

    async def metrics(self) -> dict[str, float]:
        """Chromium's ``Performance.getMetrics`` (JSHeapUsedSize, LayoutDuration, ScriptDuration, Nodes...)."""
        await self.send("Performance.enable")
        result = await self.send("Performance.getMetrics")
        return {m["name"]: m["value"] for m in result.get("metrics", [])}

    async def ping(self, *, timeout: float = 10.0) -> float:
        """Seconds a trivial evaluation took to answer: the page's main thread is free when it is small."""
        start = time.monotonic()
        await self.evaluate("1", timeout=timeout, await_promise=False)
        return time.monotonic() - start

    # -- output --------------------------------------------------------------------------------

    async def screenshot(self, path: Path | str | None = None, *, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or the whole page with ``full_page``), written to ``path`` if given."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = await self.evaluate("({w: document.documentElement.scrollWidth, "
                                       "h: document.documentElement.scrollHeight})")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["w"], "height": size["h"], "scale": 1})
        data = base64.b64decode((await self.send("Page.captureScreenshot", params, timeout=60))["data"])
        if path is not None:
            Path(path).write_bytes(data)
        return data

    async def download(self, selector: str, directory: Path, *, timeout: float = 30.0) -> Path:
        """Click a download link and wait for the file; returns its path in ``directory``."""
        return await self.browser._download(self, selector, Path(directory), timeout)

    async def close(self) -> None:
        self.browser._conn.unlisten(self.session_id, self._on_event)
        with suppress(CDPError):
            await self.browser._conn.send("Target.closeTarget", {"targetId": self.target_id})


class Browser:
    """A headless Chromium process and its DevTools connection; use :meth:`launch`."""

    def __init__(self, proc: subprocess.Popen, conn: _Connection, workdir: Path, log_path: Path):
        self.proc = proc
        self._conn = conn
        self.workdir = workdir
        self.log_path = log_path
        self.pages: list[Page] = []
        self._download_dir: Path | None = None

    @classmethod
    @asynccontextmanager
    async def launch(cls, workdir: Path | str | None = None, *, executable: str | None = None,
                     extra_args: tuple[str, ...] = (), timeout: float = 60.0):
        """Start headless Chromium, yield the :class:`Browser`, kill it (and its children) on exit.

        ``workdir`` holds the throw-away profile and ``chromium.log`` (stderr); a temp dir (removed
        after) when None. Raises :class:`CDPError` when no Chromium is found or it does not start.
        """
        executable = executable or find_chromium()
        if not executable:
            raise CDPError("no Chromium: set PYSCHED_CHROMIUM or put chromium on PATH (hack/chromium.sh)")
        own_tmp = workdir is None
        work = Path(tempfile.mkdtemp(prefix="pysched-cdp-")) if workdir is None else Path(workdir)
        work.mkdir(parents=True, exist_ok=True)
        profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=work))
        log_path = work / "chromium.log"
        log = open(log_path, "ab")
        proc = subprocess.Popen([executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                 "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                                 *extra_args, "about:blank"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        browser = None
        try:
            ws_url = await _devtools_url(proc, profile, log_path, timeout)
            session = aiohttp.ClientSession()
            try:
                ws = await session.ws_connect(ws_url, max_msg_size=0, timeout=aiohttp.ClientWSTimeout(ws_close=5))
            except BaseException:
                await session.close()
                raise
            browser = cls(proc, _Connection(ws, session), work, log_path)
            yield browser
        finally:
            if browser is not None:
                await browser._conn.close()
            _kill(proc)
            if own_tmp:
                shutil.rmtree(work, ignore_errors=True)
            else:
                shutil.rmtree(profile, ignore_errors=True)

    async def new_page(self, *, width: int = 1400, height: int = 1000) -> Page:
        """A new tab on ``about:blank`` with a ``width`` x ``height`` viewport, its domains enabled."""
        target = (await self._conn.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await self._conn.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        page = Page(self, target, session)
        for domain in ("Page", "Runtime", "Log"):
            await page.send(f"{domain}.enable")
        await page.set_viewport(width, height)
        self.pages.append(page)
        return page

    def log(self) -> str:
        """Chromium's stderr so far (for failure messages)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def _download(self, page: Page, selector: str, directory: Path, timeout: float) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        if self._download_dir != directory:
            await self._conn.send("Browser.setDownloadBehavior", {"behavior": "allowAndName",
                                                                 "downloadPath": str(directory),
                                                                 "eventsEnabled": True})
            self._download_dir = directory
        loop = asyncio.get_running_loop()
        began: asyncio.Future = loop.create_future()
        done: asyncio.Future = loop.create_future()

        def on_event(method: str, params: dict) -> None:
            if method == "Browser.downloadWillBegin" and not began.done():
                began.set_result(params)
            elif method == "Browser.downloadProgress" and began.done() and params.get("guid") == began.result()["guid"]:
                if params.get("state") in ("completed", "canceled") and not done.done():
                    done.set_result(params)

        self._conn.listen(None, on_event)
        try:
            await page.click(selector)
            info = await asyncio.wait_for(began, timeout)
            state = await asyncio.wait_for(done, timeout)
        except TimeoutError:
            raise CDPError(f"download from {selector!r}: nothing within {timeout}s") from None
        finally:
            self._conn.unlisten(None, on_event)
        if state["state"] != "completed":
            raise CDPError(f"download from {selector!r}: {state['state']}")
        # allowAndName stores the file under its guid; give it the name the server suggested.
        target = directory / (info.get("suggestedFilename") or info["guid"])
        (directory / info["guid"]).replace(target)
        return target


async def _devtools_url(proc: subprocess.Popen, profile: Path, log_path: Path, timeout: float) -> str:
    """The browser target's WebSocket URL, from DevToolsActivePort (or the stderr line)."""
    deadline = time.monotonic() + timeout
    active = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if active.exists():
            lines = active.read_text().split()
            if len(lines) >= 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        m = re.search(r"DevTools listening on (ws://\S+)", log_path.read_text(errors="replace"))
        if m:
            return m.group(1)
        if proc.poll() is not None:
            raise CDPError(f"Chromium exited ({proc.returncode}):\n{log_path.read_text(errors='replace')[-3000:]}")
        await asyncio.sleep(0.05)
    raise CDPError(f"Chromium did not open DevTools within {timeout}s:\n"
                   f"{log_path.read_text(errors='replace')[-3000:]}")


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the browser's process group (it was started in its own session) and reap it."""
    if proc.poll() is None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _remote_text(obj: dict) -> str:
    """A console argument (a Runtime.RemoteObject) as text."""
    if "value" in obj:
        return obj["value"] if isinstance(obj["value"], str) else json.dumps(obj["value"])
    return obj.get("description") or obj.get("unserializableValue") or obj.get("type", "")
