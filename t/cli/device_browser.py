"""device_browser.py: drive denv-cp's device-approval page in headless
Chromium over the DevTools protocol, the way a person would: open the URL
`denv login` printed, type an email, click "Sign in", check the code, click
"Approve". Real clicks (Input.dispatchMouseEvent at the button's centre), not
form.submit(), so the page's own form, cookies and CSP are what is tested.

    python device_browser.py CHROMIUM URL EMAIL OUTDIR
    python device_browser.py CHROMIUM URL --github OUTDIR

Writes OUTDIR/<step>.html (the DOM after each step: signin, form, done,
again, unknown) and OUTDIR/form.png (a screenshot of the approval form). The
shell test asserts on those files; this script only fails when the browser
cannot be driven (exit 1, reason on stderr).

With --github it clicks "Sign in with GitHub" instead of typing an email,
follows the whole round trip (the GitHub in front of it, t/fakes/github.py,
approves at once or after a click on its Authorize button) until the page
shows the approval form or not, then clicks Approve:
OUTDIR/github-start.html, consent.html, form.html, done.html.
"""
import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

import websockets

STEP_TIMEOUT = 20


class Page:
    def __init__(self, ws, session):
        self.ws = ws
        self.session = session
        self.next_id = 0
        self.events = []

    async def call(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        await self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), STEP_TIMEOUT))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    async def wait_event(self, name):
        while True:
            for i, ev in enumerate(self.events):
                if ev["method"] == name:
                    del self.events[i]
                    return ev
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), STEP_TIMEOUT))
            if "method" in reply:
                self.events.append(reply)

    async def eval(self, expr):
        res = await self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate {expr}: {res['exceptionDetails']}")
        return res["result"].get("value")

    async def navigate(self, url):
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]
        await self.call("Page.navigate", {"url": url})
        await self.wait_event("Page.loadEventFired")

    async def click(self, selector):
        """A real mouse click at the element's centre; waits for the next page."""
        rect = await self.eval(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]
        for kind in ("mousePressed", "mouseReleased"):
            await self.call("Input.dispatchMouseEvent",
                            {"type": kind, "x": rect[0], "y": rect[1], "button": "left", "clickCount": 1})
        await self.wait_event("Page.loadEventFired")

    async def type_into(self, selector, text):
        await self.eval(f"document.querySelector({json.dumps(selector)}).focus()")
        await self.call("Input.insertText", {"text": text})

    async def dump(self, path):
        html = await self.eval("document.documentElement.outerHTML")
        with open(path, "w") as f:
            f.write(html)


async def drive(ws_url, url, email, out):
    async with websockets.connect(ws_url, max_size=64 << 20) as ws:
        boot = Page(ws, None)
        target = await boot.call("Target.createTarget", {"url": "about:blank"}, session=False)
        att = await boot.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                              session=False)
        page = Page(ws, att["sessionId"])
        page.next_id = boot.next_id
        await page.call("Page.enable")
        await page.call("Runtime.enable")
        await page.call("Emulation.setDeviceMetricsOverride",
                        {"width": 800, "height": 760, "deviceScaleFactor": 1, "mobile": False})

        await page.navigate(url)
        await page.dump(os.path.join(out, "signin.html"))
        await page.type_into("#email", email)
        await page.click("#signin-button")
        await page.dump(os.path.join(out, "form.html"))
        shot = await page.call("Page.captureScreenshot", {"format": "png"})
        with open(os.path.join(out, "form.png"), "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        await page.click("#approve-button")
        await page.dump(os.path.join(out, "done.html"))
        # The same link once more: already approved.
        await page.navigate(url)
        await page.dump(os.path.join(out, "again.html"))
        # A code nobody asked for.
        await page.navigate(re.sub(r"code=[^&]*", "code=ZZZZ-ZZZZ", url))
        await page.dump(os.path.join(out, "unknown.html"))
        # Typing a wrong code into the form and clicking Approve.
        await page.eval("document.querySelector('#code').value = ''")
        await page.type_into("#code", "XXXX-XXXX")
        await page.click("#approve-button")
        await page.dump(os.path.join(out, "wrong.html"))


async def settle(page, timeout=STEP_TIMEOUT):
    """Wait until the page stops moving (redirects, a meta refresh) and has loaded."""
    last, same = None, 0
    for _ in range(timeout * 10):
        await asyncio.sleep(0.1)
        try:
            now = await page.eval("document.readyState + ' ' + location.href")
        except RuntimeError:
            now = None   # the context went away mid-navigation
        same = same + 1 if now == last and now and now.startswith("complete") else 0
        last = now
        if same >= 10:
            return now
    raise RuntimeError(f"the page did not settle: {last}")


async def drive_github(ws_url, url, out):
    async with websockets.connect(ws_url, max_size=64 << 20) as ws:
        boot = Page(ws, None)
        target = await boot.call("Target.createTarget", {"url": "about:blank"}, session=False)
        att = await boot.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                              session=False)
        page = Page(ws, att["sessionId"])
        page.next_id = boot.next_id
        await page.call("Page.enable")
        await page.call("Runtime.enable")
        await page.call("Emulation.setDeviceMetricsOverride",
                        {"width": 800, "height": 760, "deviceScaleFactor": 1, "mobile": False})
        await page.navigate(url)
        await page.dump(os.path.join(out, "github-start.html"))
        await page.click("#github")
        where = await settle(page)
        if await page.eval("!!document.querySelector('#js-oauth-authorize-btn')"):
            # GitHub asks first: the way back is then started by GitHub's page.
            await page.dump(os.path.join(out, "consent.html"))
            await page.click("#js-oauth-authorize-btn")
            where = await settle(page)
        print(f"device_browser: after GitHub: {where}", file=sys.stderr)
        await page.dump(os.path.join(out, "form.html"))
        if await page.eval("!!document.querySelector('#approve-button')"):
            await page.click("#approve-button")
            await page.dump(os.path.join(out, "done.html"))


def main():
    chromium, url, email, out = sys.argv[1:5]
    profile = tempfile.mkdtemp(prefix="denv-chromium.")
    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
         f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ws_url = None
        for line in proc.stderr:
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                ws_url = m.group(1)
                break
        if not ws_url:
            sys.exit("device_browser: chromium did not print its DevTools address")
        # Keep reading its log so that a full pipe never stalls the browser.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        if email == "--github":
            asyncio.run(drive_github(ws_url, url, out))
        else:
            asyncio.run(drive(ws_url, url, email, out))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
