"""The streamed exec (denv-cp(8), "Streamed exec"): a command's output as
it happens, over GET /v1/envs/{env}/exec/stream, with the standard library
only (a small RFC 6455 client: one text message out, text messages in).

    from denv.stream import exec_stream
    s = exec_stream(client, env_id, "box", ["sh", "-c", "echo a; sleep 3; echo b"])
    for stream, data in s:          # ("stdout" | "stderr", bytes), as it arrives
        ...
    s.exit_code, s.timed_out        # once the iteration has ended

With ``stdin=True`` the command's stdin is open: ``s.write(b"...")``,
``s.close_stdin()``; with ``tty=True`` it runs on a terminal (``s.resize``);
``s.kill()`` kills it, and so does closing the stream before its end.
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
# Raw bytes in one exec.in frame (XF_CHUNK_MAX).
CHUNK_MAX = 32 << 10


class ExecStream:
    """Iterate for (stream, bytes); then exit_code and timed_out are set."""

    def __init__(self, sock: socket.socket, path: str, rest: bytes) -> None:
        self._sock = sock
        self._path = path
        self._buf = rest
        self._seq = 0
        self.exit_code: int | None = None
        self.timed_out = False

    # ---- input (exec_stream(stdin=True) or tty=True) ----

    def _frame(self, doc: dict[str, object]) -> None:
        try:
            _send_text(self._sock, json.dumps(doc).encode())
        except OSError as e:
            raise DenvError("GET", self._path, "stream", f"cannot send: {e}") from None

    def write(self, data: bytes) -> None:
        """Bytes for the command's stdin (sent in 32 KiB frames)."""
        for off in range(0, len(data), CHUNK_MAX):
            part = bytes(data[off:off + CHUNK_MAX])
            self._frame({"type": "exec.in", "data": base64.b64encode(part).decode()})

    def close_stdin(self) -> None:
        """The end of the command's stdin."""
        self._frame({"type": "exec.in", "eof": True})

    def resize(self, rows: int, cols: int) -> None:
        """The terminal's new size (tty=True)."""
        self._frame({"type": "exec.resize", "rows": int(rows), "cols": int(cols)})

    def kill(self) -> None:
        """Kill the command now; the iteration then ends with its exit code."""
        self._frame({"type": "exec.kill"})

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
                if op == 0x9:  # a ping: answered, or the server drops a long command's stream
                    _send_frame(self._sock, 0x8A, data)
                    continue
                if op != 0x1:
                    continue
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
    _send_frame(sock, 0x81, payload)


def _send_frame(sock: socket.socket, first: int, payload: bytes) -> None:
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([first]) + (bytes([0x80 | n]) if n < 126 else
                            bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                            bytes([0x80 | 127]) + struct.pack(">Q", n))
    sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def exec_stream(client: Client, env_id: str, service: str, cmd: Sequence[str],
                timeout_sec: int = 120, stdin: bool = False, tty: bool = False,
                rows: int | None = None, cols: int | None = None) -> ExecStream:
    """Start cmd in service of env_id; the answer yields its output as it comes.
    ``stdin``: its stdin is open for :meth:`ExecStream.write`; ``tty``: it runs
    on a terminal of ``rows`` x ``cols`` (its stderr then joins stdout)."""
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
    first: dict[str, object] = {"service": service, "cmd": [str(c) for c in cmd], "timeout_sec": int(timeout_sec)}
    if stdin:
        first["stdin"] = True
    if tty:
        first["tty"] = True
        if rows and cols:
            first["rows"], first["cols"] = int(rows), int(cols)
    _send_text(sock, json.dumps(first).encode())
    return ExecStream(sock, path, rest)
