"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``):
no library, no port. :meth:`Chromium.look` loads a dashboard page, waits until plotly has drawn
every chart and returns what a person sees: each chart's titles and label boxes, a screenshot."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from itertools import count
from typing import Any

from tests.support.waiting import wait_for_sync

WIDTH, HEIGHT = 1100, 900  # the window, in CSS pixels
# the label boxes of a chart a person reads: tick labels, axis titles, legend texts, the title,
# the labels drawn on bars
LABELS = (
    ".xtick text, .ytick text, text.xtitle, text.ytitle, text.legendtext, text.gtitle, text.bartext"
)
INSPECT = f"""
new Promise((resolve) => {{
  const charts = () => [...document.querySelectorAll("[data-figure]")];
  const text = (el, selector) => el.querySelector(selector)?.textContent ?? null;
  const look = () => charts().map((el) => ({{
    title: text(el, "text.gtitle"),
    x: text(el, "text.xtitle"),
    y: text(el, "text.ytitle"),
    boxes: [...el.querySelectorAll({json.dumps(LABELS)})]
      .filter((t) => t.textContent.trim())
      .map((t) => {{ const r = t.getBoundingClientRect();
        return {{text: t.textContent, left: r.left, top: r.top, right: r.right, bottom: r.bottom}}; }})
      .filter((b) => b.right > b.left && b.bottom > b.top),
  }}));
  const poll = () => charts().every((el) => "drawn" in el.dataset && el.querySelector(".js-plotly-plot .main-svg"))
    ? resolve({{charts: look(), html: document.documentElement.outerHTML}})
    : setTimeout(poll, 50);
  poll();
}})
"""


@dataclass(frozen=True, slots=True)
class Look:
    charts: list[dict[str, Any]]  # per chart: title, x and y axis titles, label boxes
    html: str  # the DOM once drawn
    png: bytes  # the whole page


class Chromium:
    """One browser; not thread-safe: one :meth:`look` at a time."""

    def __init__(self, binary: str, profile: str) -> None:
        commands, self._to = os.pipe()  # we write, Chromium reads on its fd 3
        self._from, replies = os.pipe()  # Chromium writes on its fd 4, we read
        self.process = subprocess.Popen(
            [
                *("bash", "-c", f'exec "$@" 3<&{commands} 4>&{replies}', "chromium", binary),
                *("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"),
                *("--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"),
            ],
            pass_fds=(commands, replies),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its renderers and helpers in one group, killed together
        )
        os.close(commands)
        os.close(replies)
        self._ids = count(1)
        self._buffer = b""
        self._events: list[dict[str, Any]] = []

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Call ``method``; its result (an error reply raises)."""
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to, data) :]
        while True:
            reply = self._read()
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply["result"])
            self._events.append(reply)

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        """The first event ``method`` of ``session`` (earlier ones included)."""
        while True:
            for event in self._events:
                if event.get("method") == method and event.get("sessionId") == session:
                    self._events.remove(event)
                    return event
            self._events.append(self._read())

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return dict(json.loads(message))

    def look(self, url: str) -> Look:
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=WIDTH,
            height=HEIGHT,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.send("Page.enable", session)
        self.send("Page.navigate", session, url=url)
        self.wait_event("Page.loadEventFired", session)
        seen = self.send(
            "Runtime.evaluate", session, expression=INSPECT, awaitPromise=True, returnByValue=True
        )["result"]["value"]
        size = self.send("Page.getLayoutMetrics", session)["cssContentSize"]
        shot = self.send(
            "Page.captureScreenshot",
            session,
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": WIDTH, "height": size["height"], "scale": 1},
        )
        self.send("Target.closeTarget", targetId=target)
        return Look(seen["charts"], seen["html"], base64.b64decode(shot["data"]))

    def close(self) -> None:
        """Kill the whole process group: a helper process left behind would still write into the
        profile folder while it is being removed."""
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        os.close(self._to)
        os.close(self._from)


def _removed(folder: str) -> bool:
    """Remove ``folder``; False while a killed helper's last write still lands in it."""
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


@contextmanager
def chromium(binary: str) -> Iterator[Chromium]:
    """A headless Chromium for the block; killed on the way out (which also ends a hung read)."""
    profile = tempfile.mkdtemp(prefix="chromium-")
    browser = Chromium(binary, profile)
    try:
        yield browser
    finally:
        browser.close()
        wait_for_sync(lambda: _removed(profile), "chromium's profile folder removed", timeout=30)


def overlapping(boxes: list[dict[str, Any]], slack: float = 1.0) -> list[tuple[str, str]]:
    """The pairs of label boxes that overlap by more than ``slack`` pixels both ways."""
    return [
        (a["text"], b["text"])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if min(a["right"], b["right"]) - max(a["left"], b["left"]) > slack
        and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > slack
    ]
