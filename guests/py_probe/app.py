"""`py_probe`: a Python job (componentize-py) that reports what WASI gives
it, for the deny-by-default tests: environment, wall clock, random bytes,
whether it can open a file or a socket, and whether its stdout reaches the
job log. Its output is one JSON object; it never fails on a refusal.
"""

import json
import os
import sys
import time

import wit_world
from wit_world.imports import context


def attempt(action):
    try:
        return "ok: " + str(action())
    except BaseException as e:  # a refusal is the answer, not a failure
        return "refused: " + type(e).__name__ + ": " + str(e)


def scratch(size):
    with open("/scratch/probe.txt", "w") as f:
        f.write("hi" + "x" * size)
    with open("/scratch/probe.txt") as f:
        return f.read(2)


def connect():
    import socket

    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(("127.0.0.1", int(json.loads(context.current().params).get("port", 9))))
    return "connected"


class WitWorld(wit_world.WitWorld):
    def run(self) -> bytes:
        print("hello from stdout")
        print("hello from stderr", file=sys.stderr)
        report = {
            "env": dict(os.environ),
            "time": time.time(),
            "random": os.urandom(8).hex(),
            "file": attempt(lambda: open("/etc/hostname").read()),
            "listdir": attempt(lambda: os.listdir("/")),
            "socket": attempt(connect),
            "scratch": attempt(lambda: scratch(int(json.loads(context.current().params).get("scratch_bytes", 0)))),
        }
        return json.dumps(report, sort_keys=True).encode()
