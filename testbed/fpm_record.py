"""Record SGLang's per-forward-pass stream: ``python fpm_record.py OUT ENDPOINT...`` (run with the
stack's Python, which has pyzmq). Each multipart message is one JSON line ``{"endpoint", "t",
"frames": [base64, ...]}``; SIGTERM ends the record. Subscribes before the server binds, as the
sidecar does (ZeroMQ connects to an ``ipc://`` path that does not exist yet)."""

from __future__ import annotations

import base64
import json
import signal
import sys
import time

import zmq


def main(out: str, endpoints: list[str]) -> None:
    ctx = zmq.Context()
    poller = zmq.Poller()
    socks = {}
    for ep in endpoints:
        s = ctx.socket(zmq.SUB)
        s.setsockopt(zmq.SUBSCRIBE, b"")
        s.setsockopt(zmq.RCVHWM, 0)
        s.connect(ep)
        poller.register(s, zmq.POLLIN)
        socks[s] = ep
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(out, "a") as f:
        print("recording", flush=True)
        while not stop:
            for s, _ in poller.poll(200):
                while True:
                    try:
                        frames = s.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    f.write(json.dumps({"endpoint": socks[s], "t": time.time(),
                                        "frames": [base64.b64encode(x).decode() for x in frames]}) + "\n")
            f.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
