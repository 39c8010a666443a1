#!/usr/bin/python3
"""A loopback HTTPS geolocate server (the ichnaea API that BeaconDB serves)
for geoconsent's tests: a real TLS server with a certificate of a test CA it
makes itself, which records what it was sent and answers as told.

    geolocate-server.py DIR

Makes DIR/ca.pem (the CA to trust), DIR/server.pem, DIR/server.key with
openssl, listens on 127.0.0.1 on a free port, and writes the port to DIR/port
when it is ready. Every request is appended to DIR/requests.jsonl as one JSON
line: {"method", "path", "headers", "body"} (the body parsed if it is JSON).
How it answers is read from DIR/mode at each request (default "ok"):

  ok LAT LON ACC       200 with that position
  notfound             404 with ichnaea's notFound error
  429 [SECONDS]        429, with Retry-After when SECONDS is given
  503                  a 5xx
  notjson              200 with an HTML page
  huge                 200 with 1 MiB of JSON whitespace before the object
  hang                 accepts, reads the request, never answers
  drip                 starts a 200 with no length and sends a byte a second, never ending
"""
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]


def make_certificates():
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    ca_key, ca = os.path.join(DIR, "ca.key"), os.path.join(DIR, "ca.pem")
    key, csr, cert = (os.path.join(DIR, n) for n in ("server.key", "server.csr", "server.pem"))
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
        "-subj", "/CN=geoconsent test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    ext = os.path.join(DIR, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2",
        "-extfile", ext)
    return cert, key


def mode():
    try:
        with open(os.path.join(DIR, "mode")) as f:
            return f.read().split()
    except FileNotFoundError:
        return ["ok", "52.5163", "13.3777", "50"]


LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without this, Nagle holds the
    # body until the client's delayed ACK, 40 ms later, in every round trip.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with LOCK, open(os.path.join(DIR, "requests.jsonl"), "a") as f:
            f.write(json.dumps({"method": "POST", "path": self.path, "headers": dict(self.headers.items()),
                                "body": body}) + "\n")
        m = mode()
        if m[0] == "ok":
            self.reply(200, json.dumps({"location": {"lat": float(m[1]), "lng": float(m[2])}, "accuracy": float(m[3])}))
        elif m[0] == "notfound":
            self.reply(404, json.dumps({"error": {"errors": [{"domain": "geolocation", "reason": "notFound",
                                                               "message": "Not found"}],
                                                  "code": 404, "message": "Not found"}}))
        elif m[0] == "429":
            self.reply(429, '{"error": {"code": 429}}', {"Retry-After": m[1]} if len(m) > 1 else {})
        elif m[0] == "503":
            self.reply(503, "<html>busy</html>")
        elif m[0] == "notjson":
            self.reply(200, "<html>a captive portal</html>")
        elif m[0] == "huge":
            self.reply(200, " " * (1 << 20) + '{"location": {"lat": 1, "lng": 2}, "accuracy": 3}')
        elif m[0] == "hang":
            time.sleep(3600)
        elif m[0] == "drip":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()   # no length: the body ends when the connection does, which it never does
            self.close_connection = True
            for _ in range(3600):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(1)

    def reply(self, status, text, headers={}):
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def main():
    cert, key = make_certificates()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    with open(os.path.join(DIR, "port.tmp"), "w") as f:
        f.write(str(port))
    os.rename(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
    server.serve_forever()


main()
