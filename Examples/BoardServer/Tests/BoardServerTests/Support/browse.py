#!/usr/bin/env python3
"""Opens a page in headless Chromium and waits until its text holds what is expected.

    browse.py URL EXPECTED SCREENSHOT [TIMEOUT]

Chromium is driven over its DevTools protocol (a WebSocket, spoken here with the standard
library only): --dump-dom alone cannot wait for a live page, since it dumps at the load event,
before a Server-Sent Events stream has delivered anything, and a page with a stream open never
lets --virtual-time-budget run out. Every 100 ms the page's cards and status are read; once the
page's text contains EXPECTED (or TIMEOUT seconds passed), a screenshot is written to SCREENSHOT
and the last reading is printed as JSON: {"found", "cards", "status", "events", "changes"}.
The page is left open until then: the server under test sees its stream open
(GET /health/streams). Exit status 0 even when EXPECTED never came: the caller judges.
"""
import base64, json, os, shutil, socket, struct, subprocess, sys, tempfile, time, urllib.request

url, expected, screenshot = sys.argv[1], sys.argv[2], sys.argv[3]
timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 30
browser = os.environ.get("CHROMIUM", shutil.which("chromium") or "chromium")
profile = tempfile.mkdtemp(prefix="board-chromium-")
log = open(os.path.join(profile, "chromium.log"), "w")
chromium = subprocess.Popen(
    [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--window-size=800,600",
     "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
    stdout=log, stderr=log, stdin=subprocess.DEVNULL)


class Socket:
    """A WebSocket client: enough of RFC 6455 for the DevTools protocol's text frames."""

    def __init__(self, ws_url):
        host_port, path = ws_url[len("ws://"):].split("/", 1)
        host, port = host_port.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += self.sock.recv(1)
        if b" 101 " not in answer.split(b"\r\n")[0]:
            raise RuntimeError(f"DevTools refused the WebSocket: {answer!r}")
        self.next_id = 0

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise RuntimeError("DevTools closed the WebSocket")
            data += chunk
        return data

    def _frame(self):
        first, second = self._read(2)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._read(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self._read(8))[0]
        return first & 0x0F, first & 0x80, self._read(length)

    def call(self, method, **params):
        self.next_id += 1
        payload = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        while True:
            message = b""
            while True:
                opcode, final, data = self._frame()
                message += data
                if final:
                    break
            if opcode == 8:
                raise RuntimeError("DevTools closed the WebSocket")
            reply = json.loads(message)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]


READ = """JSON.stringify({
  cards: [...document.querySelectorAll('#cards li')].map(li => li.firstChild ? li.firstChild.textContent : ''),
  status: document.getElementById('status') ? document.getElementById('status').dataset.state : null,
  events: document.getElementById('status') ? Number(document.getElementById('status').dataset.events) : 0,
  changes: document.getElementById('status') ? Number(document.getElementById('status').dataset.changes) : 0,
  text: document.body ? document.body.innerText : ''})"""

try:
    deadline = time.monotonic() + timeout
    port_file = os.path.join(profile, "DevToolsActivePort")
    while not os.path.exists(port_file) or not open(port_file).read().strip():
        if chromium.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("Chromium did not start: " + open(os.path.join(profile, "chromium.log")).read()[-2000:])
        time.sleep(0.05)
    port = open(port_file).read().split()[0]
    targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
    page = Socket(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
    page.call("Page.enable")
    page.call("Page.navigate", url=url)
    reading = {}
    while True:
        result = page.call("Runtime.evaluate", expression=READ, returnByValue=True)
        reading = json.loads(result["result"].get("value") or "{}")
        if expected in reading.get("text", "") or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    reading["found"] = expected in reading.get("text", "")
    shot = page.call("Page.captureScreenshot", format="png")
    with open(screenshot, "wb") as file:
        file.write(base64.b64decode(shot["data"]))
    del reading["text"]
    print(json.dumps(reading))
finally:
    chromium.terminate()
    try:
        chromium.wait(10)
    except subprocess.TimeoutExpired:
        chromium.kill()
    shutil.rmtree(profile, ignore_errors=True)
