"""tests/serve/harness.py: start `brrr serve` on a free loopback port for a test, and stop it.

    with Server(brrr, checkpoint, "--slots", "4") as s:
        s.url          # http://127.0.0.1:PORT
        s.post("/v1/completions", {...})   # (status, headers, body bytes)

The server prints the URL it listens on; `--port 0` lets the system choose a free port. On
exit the server gets SIGINT, as from Ctrl-C, and must exit 0 within 20 s.
"""
import http.client
import json
import re
import signal
import subprocess
import threading
import time


class Server:
    def __init__(self, brrr, checkpoint, *args):
        self.command = [brrr, "serve", "--checkpoint", checkpoint, "--port", "0", *args]
        self.proc = None
        self.output = []

    def __enter__(self):
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 120
        port = None
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("brrr serve exited: " + "".join(self.output))
            self.output.append(line)
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            raise RuntimeError("brrr serve printed no URL")
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        threading.Thread(target=self._drain, daemon=True).start()
        while time.time() < deadline:
            try:
                if self.get("/health")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("brrr serve did not become ready")

    def _drain(self):
        for line in self.proc.stdout:
            self.output.append(line)

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise RuntimeError("brrr serve did not exit within 20 s of SIGINT")
        if code != 0 and exc[0] is None:
            raise RuntimeError(f"brrr serve exited {code} after SIGINT: " + "".join(self.output[-20:]))

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            conn.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body, headers=None):
        return self.request("POST", path, body, headers)


def skip(reason):
    """ctest's Skipped: exit 77 (SKIP_RETURN_CODE) after saying why."""
    print("SKIPPED: " + reason)
    raise SystemExit(77)
