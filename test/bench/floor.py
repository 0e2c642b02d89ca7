"""The no-server floor of the kernel benchmarks (test/bench/kernels.go).

A client talks ZMQ straight to ipykernel with jupyter_client, as a notebook server does
internally, so the numbers are what a kernel costs before any server or proxy is in the way.
The bench runs this with Debian's python3 and reads one JSON object from the last line of
stdout; times are in seconds.
"""

import argparse
import json
import queue
import subprocess
import sys
import threading
import time

import zmq
from jupyter_client.manager import KernelManager

# Generous: twenty kernels starting at once on two cores take seconds each.
TIMEOUT = 120


def start(timeout=TIMEOUT):
    """Starts a kernel and returns it once it answered kernel_info."""
    km = KernelManager(kernel_name="python3")
    # The kernels' own output would mix with the JSON this script prints.
    km.start_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kc = km.client()
    kc.start_channels()
    try:
        kc.kernel_info(reply=True, timeout=timeout)
    except Exception:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc


def stop(km, kc):
    kc.stop_channels()
    # now=False is what Jupyter Server's DELETE /api/kernels/<id> does: a shutdown_request,
    # then waiting for the process to exit.
    km.shutdown_kernel(now=False)


def serve_starts():
    """Answers each line "start" on stdin with one timed start and shutdown, as a JSON line;
    the bench interleaves them with the servers' starts."""
    for line in sys.stdin:
        if line.strip() != "start":
            continue
        try:
            t0 = time.perf_counter()
            km, kc = start()
            out = {"start": time.perf_counter() - t0}
            t0 = time.perf_counter()
            stop(km, kc)
            out["delete"] = time.perf_counter() - t0
        except Exception as e:  # reported to the bench, which stops asking
            out = {"error": repr(e)}
        print(json.dumps(out), flush=True)


class Reader:
    """Receives on a client's shell and iopub sockets synchronously.

    The blocking client's get_*_msg run an asyncio loop per call, about 2 ms here: slower
    than ipykernel sends stream messages, so with twenty thousand of them the ZMQ queues fill
    and drop messages past their high-water mark, the idle status among them. The floor reads
    the same sockets without the loop."""

    def __init__(self, kc):
        self.session = kc.session
        self.iopub = zmq.Socket.shadow(kc.iopub_channel.socket.underlying)
        self.shell = zmq.Socket.shadow(kc.shell_channel.socket.underlying)

    def recv(self, sock, timeout=TIMEOUT):
        if not sock.poll(timeout * 1000):
            raise queue.Empty(f"nothing received in {timeout} s")
        _, parts = self.session.feed_identities(sock.recv_multipart())
        return self.session.deserialize(parts)

    def drain(self):
        for sock in (self.iopub, self.shell):
            while sock.poll(0):
                sock.recv_multipart()


def subscribe(kc, reader):
    """Returns once iopub delivers: a SUB socket misses what is published before its
    subscription reaches the kernel, so a first execute could lose its idle status. Jupyter
    Server's WebSocket handler nudges with kernel_info requests the same way."""
    while True:
        kc.kernel_info()
        if reader.iopub.poll(200):
            break
    time.sleep(0.2)
    reader.drain()


def run_until_idle(kc, reader, code, on_iopub=None):
    """Executes code and returns once both the execute_reply and the idle status of the request
    arrived, the same end point the WebSocket clients of the bench wait for."""
    msg_id = kc.execute(code)
    while True:
        msg = reader.recv(reader.iopub)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if on_iopub is not None:
            on_iopub(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    while reader.recv(reader.shell)["parent_header"].get("msg_id") != msg_id:
        pass


def round_trips(kc, reader, n, warmup):
    for _ in range(warmup):
        run_until_idle(kc, reader, "1+1")
    rtt = []
    for _ in range(n):
        t0 = time.perf_counter()
        run_until_idle(kc, reader, "1+1")
        rtt.append(time.perf_counter() - t0)
    return rtt


def stream(kc, reader, lines):
    counts = {"messages": 0, "lines": 0}

    def count(msg):
        if msg["msg_type"] == "stream":
            counts["messages"] += 1
            counts["lines"] += msg["content"]["text"].count("\n")

    t0 = time.perf_counter()
    run_until_idle(kc, reader, f"for i in range({lines}): print(i, flush=True)", count)
    counts["seconds"] = time.perf_counter() - t0
    return counts


# A concurrent start whose kernel does not answer within this is a failed attempt.
CONCURRENT_TIMEOUT = 60


def concurrent(n, attempts=3):
    """Starts n kernels on n threads at once; returns the time until all answered kernel_info.

    Now and then one of twenty kernels started at once by jupyter_client's blocking clients
    never gets its kernel_info reply; that attempt measures nothing, so it is made again."""
    for attempt in range(attempts):
        try:
            return concurrent_once(n)
        except RuntimeError:
            if attempt == attempts - 1:
                raise


def concurrent_once(n):
    kernels, errors = [], []
    lock = threading.Lock()

    def one():
        try:
            # A hundred at once on two cores: the last ones answer after a minute or more.
            k = start(max(CONCURRENT_TIMEOUT, 2 * n))
        except Exception as e:  # reported below, once the others are stopped
            with lock:
                errors.append(repr(e))
            return
        with lock:
            kernels.append(k)

    threads = [threading.Thread(target=one) for _ in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    stoppers = [threading.Thread(target=stop, args=k) for k in kernels]
    for t in stoppers:
        t.start()
    for t in stoppers:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of {n} kernels failed: {errors[0]}")
    return elapsed


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--round-trips", type=int, default=500)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--lines", type=int, default=20000)
    p.add_argument("--only-concurrent", type=int, metavar="N",
                   help="only start N kernels at once, and print how long that took")
    p.add_argument("--serve-starts", action="store_true",
                   help="for each line 'start' on stdin, time a start and a shutdown and print them")
    a = p.parse_args()

    if a.only_concurrent:
        print(json.dumps({"concurrent": concurrent(a.only_concurrent)}), flush=True)
        return
    if a.serve_starts:
        serve_starts()
        return
    out = {}
    km, kc = start()
    try:
        reader = Reader(kc)
        subscribe(kc, reader)
        out["round_trip"] = round_trips(kc, reader, a.round_trips, a.warmup)
        out["stream"] = stream(kc, reader, a.lines)
    finally:
        stop(km, kc)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
