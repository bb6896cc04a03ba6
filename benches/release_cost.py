#!/usr/bin/env python3
"""What the release script costs the servers, with the client held fixed.

One lockstep client (this script: `SET key token NX PX` to five nodes, then `EVALSHA` of a
release script to the five, each phase waiting for every reply) runs the same cycles with
each release script in turn, alternated over several passes on fresh `redis-server`
processes on free loopback ports. Only the script differs, so the difference in the
servers' CPU time per cycle (the processes' schedstat) and in `EVALSHA`'s `usec_per_call`
(INFO commandstats of node 0) is the script's.

Scripts: `floor` (the benchmark floors' compare-and-delete); `redlease` (core/src/scripts.rs
RELEASE_ONE, which every lock of one resource releases with, on a key nobody waited for:
compare-and-delete, as in every uncontended cycle); `redlease-marked` (the same script on a key
a refused waiter marked, `token:`, with an empty queue: it also reads the queue's head and
PUBLISHes the release, which is what a contended release adds); and `general` (RELEASE, the
release of several keys or one that leaves its queue, which one-key locks used before
RELEASE_ONE, on an unmarked key).

    python3 benches/release_cost.py [passes]     # default 6 passes; needs redis-server
"""

import glob
import os
import re
import socket
import statistics
import subprocess
import sys
import time

CYCLES = 3000
WARMUP = 200
NODES = 5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def release_script(name):
    src = open(os.path.join(ROOT, "core/src/scripts.rs")).read()
    return re.search(r'pub\(crate\) const %s: &str = r"(.*?)";' % name, src, re.S).group(1)


def scripts():
    one, general = release_script("RELEASE_ONE"), release_script("RELEASE")
    floor = "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end"
    # name: (source, extra ARGV after the token, what the lock key's value adds to the token)
    return {
        "floor": (floor, [], b""),
        "redlease": (one, [b"20"], b""),
        "redlease-marked": (one, [b"20"], b":"),
        "general": (general, [b"0", b"20"], b""),
    }


def enc(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_reply(sock, buf):
    """One simple reply (status, error, integer or bulk string) off `sock`; `buf` keeps leftovers."""
    while True:
        end = buf[0].find(b"\r\n")
        if end >= 0:
            head = buf[0][:end]
            if head[:1] == b"$" and int(head[1:]) >= 0:
                need = end + 2 + int(head[1:]) + 2
                if len(buf[0]) >= need:
                    body, buf[0] = buf[0][end + 2 : need - 2], buf[0][need:]
                    return body
            else:
                buf[0] = buf[0][end + 2 :]
                if head[:1] == b"-":
                    raise RuntimeError(head.decode())
                return head[1:]
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed")
        buf[0] += chunk


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_ns(pid):
    return sum(int(open(t + "/schedstat").read().split()[0]) for t in glob.glob(f"/proc/{pid}/task/*"))


def measure(src, extra, mark):
    ports = [free_port() for _ in range(NODES)]
    servers = [
        subprocess.Popen(
            ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        for p in ports
    ]
    try:
        socks = []
        for p in ports:
            for _ in range(100):
                try:
                    socks.append(socket.create_connection(("127.0.0.1", p)))
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                raise RuntimeError(f"redis-server on port {p} did not start")
        bufs = [[b""] for _ in socks]
        for s in socks:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        shas = []
        for s, b in zip(socks, bufs):
            s.sendall(enc("SCRIPT", "LOAD", src))
            shas.append(read_reply(s, b))

        def cycle(i):
            token = b"t%d" % i
            for s in socks:
                s.sendall(enc("SET", "k", token + mark, "NX", "PX", 10000))
            for s, b in zip(socks, bufs):
                if read_reply(s, b) != b"OK":
                    raise RuntimeError("SET NX was refused: the previous release deleted nothing")
            for s, sha in zip(socks, shas):
                s.sendall(enc("EVALSHA", sha, 1, "k", token, *extra))
            for s, b in zip(socks, bufs):
                if read_reply(s, b) != b"1":
                    raise RuntimeError("the release script deleted nothing")

        for i in range(WARMUP):
            cycle(i)
        socks[0].sendall(enc("CONFIG", "RESETSTAT"))
        read_reply(socks[0], bufs[0])
        cpu0 = sum(server_ns(s.pid) for s in servers)
        t0 = time.perf_counter()
        for i in range(CYCLES):
            cycle(i)
        took = time.perf_counter() - t0
        cpu = sum(server_ns(s.pid) for s in servers) - cpu0
        socks[0].sendall(enc("INFO", "commandstats"))
        info = read_reply(socks[0], bufs[0]).decode()
        per_call = float(re.search(r"cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)", info).group(1))
        return took / CYCLES * 1e6, cpu / CYCLES / 1e3, per_call
    finally:
        for s in servers:
            s.terminate()
        for s in servers:
            s.wait()


def main():
    passes = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    if subprocess.run(["sh", "-c", "command -v redis-server"], stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit("redis-server not found: install the Debian package redis-server")
    chosen = scripts()
    found = {name: [] for name in chosen}
    for p in range(passes):
        for name, (src, extra, mark) in chosen.items():
            found[name].append(measure(src, extra, mark))
        print(f"pass {p + 1}/{passes} done", file=sys.stderr)
    base = statistics.median(r[1] for r in found["floor"])
    print(f"{CYCLES} cycles per pass, {passes} passes alternated; medians (server CPU: min-max over passes)")
    print(f"{'release script':16} {'cycle':>9} {'server CPU/cycle':>17} {'÷ floor':>8} {'EVALSHA usec/call':>18}")
    for name, rows in found.items():
        cpu = statistics.median(r[1] for r in rows)
        lo, hi = min(r[1] for r in rows), max(r[1] for r in rows)
        print(
            f"{name:16} {statistics.median(r[0] for r in rows):7.0f} µs {cpu:6.0f} µs ({lo:.0f}-{hi:.0f}) "
            f"{cpu / base:7.2f}× {statistics.median(r[2] for r in rows):12.1f}"
        )


if __name__ == "__main__":
    main()
