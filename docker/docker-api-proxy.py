#!/usr/bin/env python3
"""A Unix-socket proxy in front of an older Docker daemon, for testcontainers.

testcontainers-rs 0.27 (bollard 0.20) always speaks Docker Engine API 1.52 (`/v1.52/...`),
and a daemon older than Docker 29 answers "client version 1.52 is too new". Debian
bookworm's docker.io is 20.10 (API 1.41). This proxy rewrites the version in each request
line to the daemon's own (asked once with GET /version) and passes everything else through
byte for byte: request bodies (Content-Length or chunked), streamed responses, and
upgraded (hijacked) connections.

    python3 docker/docker-api-proxy.py /var/tmp/txretry-docker/api.sock [/var/run/docker.sock]
    export DOCKER_HOST=unix:///var/tmp/txretry-docker/api.sock

Only local Unix sockets; it stops on SIGTERM/SIGINT.
"""
import json
import os
import re
import signal
import socket
import sys
import threading

LISTEN = sys.argv[1] if len(sys.argv) > 1 else "/var/tmp/txretry-docker/api.sock"
UPSTREAM = sys.argv[2] if len(sys.argv) > 2 else "/var/run/docker.sock"
VERSIONED = re.compile(rb"^([A-Z]+ )/v\d+\.\d+(/\S*)( HTTP/1\.[01])$")


def daemon_api_version():
    s = socket.socket(socket.AF_UNIX)
    s.connect(UPSTREAM)
    s.sendall(b"GET /version HTTP/1.0\r\nHost: docker\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])["ApiVersion"].encode()


API = daemon_api_version()


class Reader:
    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def pipe(src, dst):
    try:
        while True:
            chunk = src.recv(65536)
            if not chunk:
                break
            dst.sendall(chunk)
    except OSError:
        pass
    for s in (dst,):
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def client_to_daemon(client, daemon):
    r = Reader(client)
    try:
        while True:
            request = r.line()
            m = VERSIONED.match(request)
            if m:
                request = m.group(1) + b"/v" + API + m.group(2) + m.group(3)
            headers = []
            while True:
                h = r.line()
                if not h:
                    break
                headers.append(h)
            daemon.sendall(request + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n")
            lower = {h.split(b":", 1)[0].strip().lower(): h.split(b":", 1)[1].strip().lower()
                     for h in headers if b":" in h}
            if b"upgrade" in lower.get(b"connection", b""):
                if r.buf:
                    daemon.sendall(r.buf)
                pipe(client, daemon)
                return
            if lower.get(b"transfer-encoding") == b"chunked":
                while True:
                    size_line = r.line()
                    size = int(size_line.split(b";")[0], 16)
                    daemon.sendall(size_line + b"\r\n" + r.exact(size + 2))
                    if size == 0:
                        break
            elif b"content-length" in lower:
                daemon.sendall(r.exact(int(lower[b"content-length"])))
    except (EOFError, OSError, ValueError):
        pass
    try:
        daemon.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def serve(client):
    daemon = socket.socket(socket.AF_UNIX)
    try:
        daemon.connect(UPSTREAM)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=pipe, args=(daemon, client), daemon=True)
    back.start()
    client_to_daemon(client, daemon)
    back.join()
    client.close()
    daemon.close()


def main():
    try:
        os.unlink(LISTEN)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX)
    server.bind(LISTEN)
    os.chmod(LISTEN, 0o660)
    server.listen(64)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"docker-api-proxy: {LISTEN} -> {UPSTREAM} (API v{API.decode()})", flush=True)
    try:
        while True:
            client, _ = server.accept()
            threading.Thread(target=serve, args=(client,), daemon=True).start()
    except KeyboardInterrupt:
        pass
    finally:
        os.unlink(LISTEN)


if __name__ == "__main__":
    main()
