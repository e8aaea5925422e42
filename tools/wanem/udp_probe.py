#!/usr/bin/env python3
"""UDP sender and receiver for the emulator's physics checks (tools/wanem/physics.sh).

  udp_probe.py recv PORT SECONDS          count datagrams until SECONDS of silence after the
                                          first; print "received N bytes B first_s last_s"
  udp_probe.py send HOST PORT COUNT SIZE RATE_PPS   paced datagrams, sequence-numbered
"""
import socket
import struct
import sys
import time


def recv(port, quiet):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # A stall of this process must not drop datagrams the emulator delivered: FORCE passes the
    # host's rmem_max (root only; otherwise the capped size).
    try:
        s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 64 << 20)
    except PermissionError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.bind(("0.0.0.0", port))
    s.settimeout(30)
    n = nbytes = 0
    first = last = None
    try:
        while True:
            data = s.recv(65535)
            now = time.monotonic()
            if first is None:
                first = now
                s.settimeout(quiet)
            last = now
            n += 1
            nbytes += len(data)
    except socket.timeout:
        pass
    print(f"received {n} bytes {nbytes} first_s {first or 0:.6f} last_s {last or 0:.6f}")


def send(host, port, count, size, pps):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
    payload = bytearray(size)
    t0 = time.monotonic()
    for i in range(count):
        struct.pack_into("!Q", payload, 0, i)
        # Pace by the clock: catch up in bursts, never run ahead.
        due = t0 + i / pps
        while time.monotonic() < due:
            pass
        while True:
            try:
                s.sendto(payload, (host, port))
                break
            except BlockingIOError:
                time.sleep(0.0001)


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(int(sys.argv[2]), float(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
