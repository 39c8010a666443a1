#!/usr/bin/python3
"""wifi-client.py [SOCKET]: talk to the Wi-Fi helper's socket as geoconsentd
does (default /run/geoconsent/wifi.sock).

Connects and prints "connected" (or "refused: REASON" and exits 1), then for
each line read on standard input sends it as a request and prints the one
answer line the helper sends back ("closed" if the connection ended first,
"no answer in 30 s" if none came, and then it stops).
At the end of standard input it closes the connection and exits 0. So
`wifi-client.py </dev/null` only connects, `printf 'lookup ...\\n' |
wifi-client.py` asks once, and a caller that keeps standard input open keeps
the connection, and the helper started for it, alive.
"""
import socket
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "/run/geoconsent/wifi.sock"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(path)
except OSError as e:
    print(f"refused: {e.strerror} (errno {e.errno})", flush=True)
    sys.exit(1)
print("connected", flush=True)
answers = s.makefile("rb")
for line in sys.stdin:
    s.sendall(line.rstrip("\n").encode() + b"\n")
    s.settimeout(30)
    try:
        answer = answers.readline()
    except socket.timeout:
        print("no answer in 30 s", flush=True)
        break
    print(answer.decode(errors="replace").rstrip("\n") if answer else "closed", flush=True)
s.close()
