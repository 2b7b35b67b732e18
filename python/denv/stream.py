"""The streamed exec (denv-cp(8), "Streamed exec"): a command's output as
it happens, over GET /v1/envs/{env}/exec/stream, with the standard library
only (a small RFC 6455 client: one text message out, text messages in).

    from denv.stream import exec_stream
    s = exec_stream(client, env_id, "box", ["sh", "-c", "echo a; sleep 3; echo b"])
    for stream, data in s:          # ("stdout" | "stderr", bytes), as it arrives
        ...
    s.exit_code, s.timed_out        # once the iteration has ended
"""
from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import struct
from typing import Iterator, Sequence
from urllib.parse import quote, urlsplit

from denv.client import Client, DenvError, DenvTimeout

# One frame from the server: the base64 of 32 KiB plus its members (xframe.h).
FRAME_MAX = 64 << 10


class ExecStream:
    """Iterate for (stream, bytes); then exit_code and timed_out are set."""

    def __init__(self, sock: socket.socket, path: str, rest: bytes) -> None:
        self._sock = sock
        self._path = path
        self._buf = rest
        self._seq = 0
        self.exit_code: int | None = None
        self.timed_out = False

    def _recv(self, n: int) -> bytes:
        while len(self._buf) < n:
            b = self._sock.recv(65536)
            if not b:
                raise DenvError("GET", self._path, "stream", "the stream closed before the command ended")
            self._buf += b
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _message(self) -> tuple[int, bytes]:
        head = self._recv(2)
        op, n = head[0] & 0x0F, head[1] & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._recv(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._recv(8))[0]
        if n > FRAME_MAX:
            raise DenvError("GET", self._path, "stream", f"a frame of {n} bytes is over the limit")
        return op, self._recv(n)

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        try:
            while True:
                op, data = self._message()
                if op == 0x8:
                    raise DenvError("GET", self._path, "stream", "the stream closed before the command ended")
                if op != 0x1:
                    continue  # pings: the server's keepalive needs no answer within a command's life
                f = json.loads(data)
                kind = f.get("type")
                if kind == "exec.out":
                    if f.get("seq") != self._seq:
                        raise DenvError("GET", self._path, "stream", f"output frame {self._seq} lost")
                    self._seq += 1
                    yield str(f["stream"]), base64.b64decode(f["data"], validate=True)
                elif kind == "exec.exit":
                    self.exit_code = int(f["exit_code"])
                    self.timed_out = bool(f.get("timed_out"))
                    return
                else:
                    msg = str(f.get("error") or "the exec stream failed")
                    cls = DenvTimeout if "env.exec: timed out" in msg or "env.exec timed out" in msg else DenvError
                    raise cls("GET", self._path, 502, msg)
        finally:
            self._sock.close()


def _send_text(sock: socket.socket, payload: bytes) -> None:
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                            bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                            bytes([0x80 | 127]) + struct.pack(">Q", n))
    sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def exec_stream(client: Client, env_id: str, service: str, cmd: Sequence[str],
                timeout_sec: int = 120) -> ExecStream:
    """Start cmd in service of env_id; the answer yields its output as it comes."""
    if isinstance(cmd, str):
        raise TypeError("denv: exec_stream takes an argv list")
    u = urlsplit(client.server)
    path = f"/v1/envs/{quote(env_id, safe='')}/exec/stream"
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        sock = socket.create_connection((u.hostname, port), timeout=timeout_sec + 60)
        if u.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=u.hostname)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"Authorization: Bearer {client.api_key}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = sock.recv(4096)
            if not b or len(head) > 16384:
                raise DenvError("GET", path, "unreachable", "no handshake answer")
            head += b
    except OSError as e:
        raise DenvError("GET", path, "unreachable", f"{client.server}: {e}") from None
    head, rest = head.split(b"\r\n\r\n", 1)
    status = head.split(b"\r\n", 1)[0].split(b" ")
    if len(status) < 2 or status[1] != b"101":
        sock.close()
        try:
            msg = json.loads(rest.decode() or "{}").get("error", "")
        except ValueError:
            msg = rest[:200].decode(errors="replace")
        raise DenvError("GET", path, int(status[1]) if len(status) > 1 and status[1].isdigit() else "?", msg)
    _send_text(sock, json.dumps({"service": service, "cmd": [str(c) for c in cmd],
                                 "timeout_sec": int(timeout_sec)}).encode())
    return ExecStream(sock, path, rest)
