#!/usr/bin/env python3
"""The kernel side of the checksum-offload test (runs in the test's network namespace).

  checksum_offload.py capture IFACE SECONDS   count UDP frames the gateway sent, how many
                                              carry valid IPv4 and UDP checksums, and how many
                                              a valid IPv4 checksum and no UDP checksum (0)
  checksum_offload.py corrupt IFACE DST_MAC SRC_MAC DST_IP SRC_IP PORT N
                                              send N UDP frames with a bad UDP checksum and N
                                              with a bad IPv4 header checksum to the gateway
"""
import socket
import struct
import sys
import time


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def capture(iface, seconds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))
    s.bind((iface, 0))
    s.settimeout(0.2)
    end = time.time() + seconds
    udp_frames = good = no_udp_sum = 0
    while time.time() < end:
        try:
            f = s.recv(65535)
        except (socket.timeout, OSError):
            continue
        if len(f) < 42 or f[12:14] != b"\x08\x00" or f[14 + 9] != 17:
            continue
        ip = f[14:34]
        total = struct.unpack("!H", ip[2:4])[0]
        udp = f[34 : 14 + total]
        pseudo = ip[12:20] + b"\x00\x11" + struct.pack("!H", len(udp))
        udp_frames += 1
        good += csum(ip) == 0 and csum(pseudo + udp) == 0
        no_udp_sum += csum(ip) == 0 and udp[6:8] == b"\x00\x00"
    print(f"udp_frames {udp_frames} valid {good} no_udp_checksum {no_udp_sum}")


def corrupt(iface, dst_mac, src_mac, dst_ip, src_ip, port, n):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    payload = b"\x4c\x54\x01\x04" + bytes(40)  # an LTP-looking CONTROL: never reached
    for bad in ("udp", "ip"):
        for _ in range(n):
            udp = struct.pack("!HHHH", port + 1, port, 8 + len(payload), 0) + payload
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                             socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
            ip_sum = csum(ip) ^ (0x0101 if bad == "ip" else 0)
            ip = ip[:10] + struct.pack("!H", ip_sum) + ip[12:]
            pseudo = ip[12:20] + b"\x00\x11" + struct.pack("!H", len(udp))
            udp_sum = (csum(pseudo + udp) or 0xFFFF) ^ (0x0101 if bad == "udp" else 0)
            udp = udp[:6] + struct.pack("!H", udp_sum) + udp[8:]
            s.send(mac(dst_mac) + mac(src_mac) + b"\x08\x00" + ip + udp)
            time.sleep(0.01)


if __name__ == "__main__":
    if sys.argv[1] == "capture":
        capture(sys.argv[2], float(sys.argv[3]))
    else:
        a = sys.argv[2:]
        corrupt(a[0], a[1], a[2], a[3], a[4], int(a[5]), int(a[6]))
