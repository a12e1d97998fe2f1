#!/usr/bin/env python3
"""A lockgrid protocol v2 client written from docs/protocol.md alone.

Clear mode only (no key, no sealing). Standard library only. It exists to
test the specification: it was built from the document's tables and
examples, not from the reference implementation, so wherever it and the
server disagree, the document is wrong or incomplete.

Usage:
    python3 lockgrid_client.py --server 127.0.0.1:7777 --seconds 5 --out run.json
    python3 lockgrid_client.py --self-test

The client connects, walks its entity well under the Welcome's max_speed,
sends a few inputs the server must refuse (a jump far beyond the distance
allowance, a speed above max_speed, a Move of another entity, a Despawn of
itself), says Bye, and
writes a JSON report: its entity, the last tick it applied, its view at
that tick, the digest of every tick it applied and every move it sent with
whether it was acknowledged.
"""

import argparse
import json
import os
import random
import select
import socket
import struct
import sys
import time

# ---------------------------------------------------------------- constants

MAGIC = b"LG"
VERSION = 2
HEADER_LEN = 19
HELLO_MIN_DATAGRAM = 64
HELLO_INTERVAL = 0.25
KEEPALIVE_INTERVAL = 1.0
IDLE_TIMEOUT = 10.0
CLOSE_TIMEOUT = 1.0
MAX_INPUT_QUEUE = 32
MTU = 1200

PADDING, HELLO, INPUT, ACK, PING, BYE = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05
WELCOME, TICK_BATCH, PONG, DISCONNECT, REFUSED = 0x10, 0x11, 0x12, 0x13, 0x14
CLIENT_TO_SERVER = {HELLO, INPUT, ACK, PING, BYE}

CMD_SPAWN, CMD_MOVE, CMD_DESPAWN = 0, 1, 2

REFUSAL_REASONS = {
    1: "not_yours", 2: "not_allowed", 3: "too_fast", 4: "too_many_moves",
    5: "bad_speed", 6: "out_of_bounds", 7: "refused",
}
REFUSALS_REMEMBERED = 256

REASONS = {
    1: "closed", 2: "version_mismatch", 3: "token_rejected", 4: "idle_timeout",
    5: "too_far_behind", 6: "protocol_violation", 7: "server_full",
    8: "unknown_connection", 9: "kicked", 10: "handshake_timeout", 11: "desync",
    12: "limit_reached", 13: "token_missing", 14: "token_invalid",
    15: "token_expired", 16: "token_wrong_protocol", 17: "token_wrong_server",
    18: "token_reused", 19: "shutting_down",
}

U64 = (1 << 64) - 1


class Malformed(Exception):
    """A packet or batch part the document says to reject."""


class Failed(Exception):
    """The connection failed (a Disconnect, a version mismatch, a timeout)."""


# ------------------------------------------------------ primitive encodings

def enc_varint(v):
    if v < 0 or v > U64:
        raise ValueError("varint out of range")
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag(v):
    return ((v << 1) ^ (v >> 63)) & U64


def unzigzag(u):
    return (u >> 1) ^ -(u & 1)


def enc_svarint(v):
    if v < -(1 << 63) or v >= 1 << 63:
        raise ValueError("svarint out of range")
    return enc_varint(zigzag(v))


def wrap64(v):
    """Wraps an integer to a signed 64-bit two's-complement value."""
    v &= U64
    return v - (1 << 64) if v >> 63 else v


class Reader:
    """Reads primitives from bytes; every error is Malformed."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def left(self):
        return len(self.data) - self.pos

    def u8(self):
        if self.pos >= len(self.data):
            raise Malformed("truncated u8")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def fixed(self, n):
        if self.left() < n:
            raise Malformed("truncated fixed-size field")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u32le(self):
        return struct.unpack("<I", self.fixed(4))[0]

    def u64le(self):
        return struct.unpack("<Q", self.fixed(8))[0]

    def varint(self, limit=U64):
        value = 0
        for i in range(10):
            b = self.u8()
            if i == 9 and b > 1:
                raise Malformed("tenth varint byte above 01")
            value |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                if i > 0 and b == 0:
                    raise Malformed("non-canonical varint")
                if value > limit:
                    raise Malformed("varint out of range")
                return value
        raise Malformed("varint longer than 10 bytes")

    def svarint(self):
        return unzigzag(self.varint())

    def fix(self):
        return self.svarint()

    def count(self, limit, min_item_bytes=1):
        """A count, capped by its limit and by the bytes left."""
        n = self.varint(limit)
        if n * min_item_bytes > self.left():
            raise Malformed("count larger than the bytes left")
        return n

    def bytes_(self, limit):
        n = self.varint(limit)
        return self.fixed(n)


# ------------------------------------------------------------------ header

def enc_header(conn_id, seq, ack, ack_bits):
    return MAGIC + bytes([VERSION]) + struct.pack("<IIII", conn_id, seq, ack, ack_bits)


def dec_header(data):
    """Returns (version, conn_id, seq, ack, ack_bits) or raises Malformed."""
    if len(data) < 3 or data[0:2] != MAGIC:
        raise Malformed("bad magic")
    version = data[2]
    if version != VERSION:
        return version, None, None, None, None
    if len(data) < HEADER_LEN:
        raise Malformed("truncated header")
    conn_id, seq, ack, ack_bits = struct.unpack("<IIII", data[3:HEADER_LEN])
    return version, conn_id, seq, ack, ack_bits


# ---------------------------------------------------------- client frames

def enc_hello(nonce, token=b""):
    return bytes([HELLO]) + enc_varint(VERSION) + struct.pack("<Q", nonce) + enc_varint(len(token)) + token


def enc_spawn_fields(s):
    return (enc_svarint(s["x"]) + enc_svarint(s["y"]) + enc_varint(s["dir"]) + enc_svarint(s["speed"])
            + bytes([s["observer"]]) + enc_svarint(s["radius"]) + enc_varint(s["layers"])
            + enc_varint(s["interest"]))


def enc_command(cmd):
    kind = cmd["kind"]
    if kind == CMD_MOVE:
        return (bytes([CMD_MOVE]) + enc_varint(cmd["id"]) + enc_svarint(cmd["x"]) + enc_svarint(cmd["y"])
                + enc_varint(cmd["dir"]) + enc_svarint(cmd["speed"]))
    if kind == CMD_DESPAWN:
        return bytes([CMD_DESPAWN]) + enc_varint(cmd["id"])
    if kind == CMD_SPAWN:
        return bytes([CMD_SPAWN]) + enc_varint(cmd["id"]) + enc_spawn_fields(cmd)
    raise ValueError("unknown command kind")


def enc_input(inputs):
    """inputs: list of (seq, tick, [commands]) in sequence order."""
    if not inputs:
        return b""
    out = bytearray([INPUT])
    out += enc_varint(inputs[0][0]) + enc_varint(len(inputs))
    prev_tick = None
    for seq, tick, commands in inputs:
        out += enc_varint(tick if prev_tick is None else tick - prev_tick - 1)
        prev_tick = tick
        out += enc_varint(len(commands))
        for c in commands:
            out += enc_command(c)
    return bytes(out)


def enc_ack(tick):
    return bytes([ACK]) + enc_varint(tick)


def enc_ping(stamp):
    return bytes([PING]) + enc_varint(stamp)


# ---------------------------------------------------------- server frames

def dec_spawn_fields(r):
    return {
        "x": r.fix(), "y": r.fix(), "dir": r.varint(0xFFFF), "speed": r.fix(),
        "observer": _observer(r.u8()), "radius": r.fix(), "layers": r.varint(0xFFFFFFFF),
        "interest": r.varint(0xFFFFFFFF),
    }


def _observer(b):
    if b > 1:
        raise Malformed("observer flag not 0 or 1")
    return b


def dec_welcome(r):
    w = {}
    w["conn_id"] = r.varint(0xFFFFFFFF)
    w["nonce"] = r.u64le()
    w["entity"] = r.varint()
    w["tick"] = r.varint()
    w["tick_interval_us"] = r.varint()
    w["window"] = r.varint(0xFFFFFFFF)
    w["origin_x"] = r.fix()
    w["origin_y"] = r.fix()
    w["cell_size"] = r.fix()
    w["width_cells"] = r.varint(0xFFFFFFFF)
    w["height_cells"] = r.varint(0xFFFFFFFF)
    w["visibility"] = r.u8()
    if w["visibility"] > 1:
        raise Malformed("visibility not 0 or 1")
    w["hysteresis"] = r.fix()
    w["max_view"] = r.varint(0xFFFFFFFF)
    w["spawn"] = dec_spawn_fields(r)
    present = r.u8()
    if present & 0xF0:
        raise Malformed("limits: bits 4-7 of present set")
    limits = {}
    if present & 1:
        limits["max_speed"] = r.fix()
    if present & 2:
        limits["burst_us"] = r.varint()
    if present & 4:
        limits["moves_per_sec"] = r.varint(0xFFFFFFFF)
    if present & 8:
        limits["budget"] = r.varint(0xFFFFFFFF)
    w["limits"] = limits
    return w


def dec_server_frames(payload):
    """Decodes the frames of a server packet; raises Malformed on any error."""
    r = Reader(payload)
    frames = []
    while r.left():
        code = r.u8()
        if code == PADDING:
            continue
        if code == WELCOME:
            frames.append(("welcome", dec_welcome(r)))
        elif code == TICK_BATCH:
            tick = r.varint()
            part = r.varint(0xFFFF)
            parts = r.varint(0xFFFF)
            if not 1 <= parts <= 1024 or part >= parts:
                raise Malformed("bad part/parts")
            digest = r.u64le()
            payload_ = r.bytes_(U64)
            frames.append(("batch", (tick, part, parts, digest, payload_)))
        elif code == PONG:
            frames.append(("pong", r.varint()))
        elif code == REFUSED:
            n = r.count(64, 3)
            if n == 0:
                raise Malformed("Refused frame with no refusal")
            refusals = []
            for _ in range(n):
                refusals.append((r.varint(), r.varint(31), r.u8()))
            frames.append(("refused", refusals))
        elif code == DISCONNECT:
            frames.append(("disconnect", r.u8()))
        elif code in CLIENT_TO_SERVER:
            # A protocol violation; its fields are not read, so the rest of
            # the packet is unreadable.
            frames.append(("wrong_direction", code))
            break
        else:
            raise Malformed("unknown frame code 0x%02x" % code)
    return frames


ACK_ELICITING = {"welcome", "batch", "pong", "disconnect", "refused"}


# ------------------------------------------------------ batch parts, view

class View:
    """The visible subjects sorted by id: [id, x, y, dir, speed, layers]."""

    def __init__(self):
        self.entries = []

    def copy(self):
        v = View()
        v.entries = [list(e) for e in self.entries]
        return v

    def ids(self):
        return [e[0] for e in self.entries]


def apply_part(view, payload, stats=None):
    """Applies one batch part to a copy of `view`.

    Returns (new_view, rejections); raises Malformed for every check the
    document lists, leaving `view` untouched (a part applies atomically).
    `stats`, if given, counts what the document does not rule on.
    """
    r = Reader(payload)
    rejections = []
    for _ in range(r.count(U64, 2)):
        entity = r.varint()
        kr = r.u8()
        command, reason = kr >> 4, kr & 0x0F
        if command > 2 or reason > 4:
            raise Malformed("rejection kind/reason out of the table")
        rejections.append((entity, command, reason))

    entries = [list(e) for e in view.entries]
    # Leaves: indices into the view before the leaves; removed afterwards.
    leave_idx = []
    nxt = 0
    for _ in range(r.count(U64, 1)):
        i = nxt + r.varint()
        if i >= len(entries):
            raise Malformed("leave index outside the view")
        leave_idx.append(i)
        nxt = i + 1
    for i in reversed(leave_idx):
        del entries[i]

    # Enters.
    present = {e[0] for e in entries}
    prev_id = None
    px = py = 0
    for _ in range(r.count(U64, 6)):
        d = r.varint()
        if prev_id is None:
            sid = d
        else:
            sid = prev_id + d + 1
            if sid > U64:
                raise Malformed("enter id overflows")
        prev_id = sid
        x = wrap64(px + r.svarint())
        y = wrap64(py + r.svarint())
        px, py = x, y
        direction = r.varint(0xFFFF)
        speed = r.svarint()
        layers = r.varint(0xFFFFFFFF)
        if sid in present:
            raise Malformed("enter of a visible subject")
        present.add(sid)
        entries.append([sid, x, y, direction, speed, layers])
    entries.sort(key=lambda e: e[0])

    # Updates: indices into the view after leaves and enters.
    nxt = 0
    for _ in range(r.count(U64, 1)):
        head = r.varint()
        gap, flags = head >> 3, head & 7
        i = nxt + gap
        if i >= len(entries):
            raise Malformed("update index outside the view")
        nxt = i + 1
        e = entries[i]
        if flags == 0:
            # A reset: the whole movable state, absolute.
            e[1] = wrap64(r.svarint())
            e[2] = wrap64(r.svarint())
            e[3] = r.varint(0xFFFF)
            e[4] = r.svarint()
            if stats is not None:
                stats["resets"] = stats.get("resets", 0) + 1
        if flags & 1:
            dx, dy = r.svarint(), r.svarint()
            if dx == 0 and dy == 0:
                raise Malformed("zero position delta")
            e[1] = wrap64(e[1] + dx)
            e[2] = wrap64(e[2] + dy)
        if flags & 2:
            ddir = r.svarint()
            if ddir == 0 or not -32768 <= ddir <= 32767:
                raise Malformed("bad heading delta")
            e[3] = (e[3] + ddir) % 65536
        if flags & 4:
            ds = r.svarint()
            if ds == 0:
                raise Malformed("zero speed delta")
            e[4] = wrap64(e[4] + ds)
    if r.left():
        raise Malformed("bytes after the update section")
    out = View()
    out.entries = entries
    return out, rejections


# --------------------------------------------------------------- the client

class Client:
    """The connection state machine (handshaking → connected → closed)."""

    def __init__(self, server, rng, log=None, net=None, sock=None):
        self.server = server
        self.rng = rng
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock = sock
        self.sock.setblocking(False)
        self.nonce = int.from_bytes(os.urandom(8), "little")
        self.state = "handshaking"
        self.log = log or (lambda *a: None)
        # Simulated faults, to exercise the reliability rules on a loopback
        # that loses nothing: "loss" drops datagrams both ways, "dup" sends
        # and receives some twice, "reorder" holds some received ones back
        # 20-150 ms.
        net = net or {}
        self.loss = net.get("loss", 0.0)
        self.dup = net.get("dup", 0.0)
        self.reorder = net.get("reorder", 0.0)
        self.held = []  # (release time, datagram)
        self.welcome = None
        self.conn_id = 0
        self.next_seq = 1
        # Received packet numbers: highest and the 32 before it.
        self.rx_high = 0
        self.rx_bits = 0
        # Sent packets: seq -> highest input sequence number it carried.
        self.sent = {}
        self.acked_input = -1  # highest acknowledged input sequence number
        self.acked_after = {}  # input sequence number -> tick applied when acknowledged
        self.inputs = []       # unacknowledged: (seq, tick, commands)
        self.next_input = 0
        self.last_input_tick = -1
        self.applied = None
        self.parts = {}        # tick -> {"parts": n, "digest": d, "got": {part: payload}}
        self.view = View()
        self.digests = {}
        self.rejections = {}
        self.must_send = False
        self.last_send = 0.0
        self.last_heard = time.monotonic()
        self.last_ping = 0.0
        self.pongs = 0
        # Refusals heard: (input seq, command index) -> reason name, and the
        # last 256 keys heard, to ignore repeats.
        self.refusals = {}
        self.recent_refusals = []
        self.disconnect_reason = None
        self.stats = {"dropped_before_welcome": 0, "dropped_duplicate": 0,
                      "dropped_beyond_window": 0, "malformed": 0, "packets_in": 0,
                      "packets_out": 0, "parts_applied": 0, "welcomes": 0,
                      "repeated_refusals": 0, "lost_in": 0, "lost_out": 0, "dup_in": 0, "dup_out": 0, "held_in": 0, "repeated_parts": 0, "resets": 0}

    # -- sending

    def _send(self, frames, hello=False):
        seq = self.next_seq
        self.next_seq += 1
        conn_id = 0 if hello else self.conn_id
        data = enc_header(conn_id, seq, self.rx_high, self.rx_bits) + frames
        if hello:
            data += bytes(max(0, HELLO_MIN_DATAGRAM - len(data)))
        if self.loss and self.rng.random() < self.loss:
            self.stats["lost_out"] += 1
        else:
            self.sock.sendto(data, self.server)
            if self.dup and not hello and self.rng.random() < self.dup:
                self.stats["dup_out"] += 1
                self.sock.sendto(data, self.server)
        self.stats["packets_out"] += 1
        self.last_send = time.monotonic()
        if self.inputs:
            self.sent[seq] = self.inputs[-1][0]
        else:
            self.sent[seq] = -1
        return seq

    def send_hello(self, repeat=False):
        """A Hello: conn_id 0, padded to 64 bytes; `repeat` once connected."""
        self._send(enc_hello(self.nonce), hello=True)

    def send_packet(self, extra=b"", ping=False):
        frames = bytearray(enc_ack(self.applied))
        if ping:
            frames += enc_ping(int(time.monotonic() * 1e6))
            self.last_ping = time.monotonic()
        frames += extra
        frames += enc_input(self.inputs)
        self._send(bytes(frames))
        self.must_send = False

    def queue_input(self, commands):
        """Queues one input; returns its sequence number, or None if full."""
        if len(self.inputs) >= MAX_INPUT_QUEUE:
            return None
        tick = max(self.last_input_tick + 1, self.applied + 1 + len(self.inputs))
        seq = self.next_input
        self.next_input += 1
        self.last_input_tick = tick
        self.inputs.append((seq, tick, commands))
        if len(enc_input(self.inputs)) + HEADER_LEN + 32 > MTU:
            self.inputs.pop()
            self.next_input -= 1
            return None
        self.must_send = True
        return seq

    # -- receiving

    def _rx_is_new(self, s):
        L = self.rx_high
        if L == 0 or s > L:
            return True
        d = L - s
        return 1 <= d <= 32 and not (self.rx_bits >> (d - 1)) & 1

    def _rx_record(self, s):
        L = self.rx_high
        if s > L:
            shift = s - L
            if L == 0:
                self.rx_bits = 0
            elif shift > 32:
                self.rx_bits = 0
            else:
                self.rx_bits = ((self.rx_bits << shift) | (1 << (shift - 1))) & 0xFFFFFFFF
            self.rx_high = s
        else:
            self.rx_bits |= 1 << (L - s - 1)

    def _on_acks(self, ack, ack_bits):
        if ack == 0:
            return
        acked = [ack] + [ack - 1 - i for i in range(32) if (ack_bits >> i) & 1]
        for s in acked:
            carried = self.sent.pop(s, None)
            if carried is not None and carried > self.acked_input:
                self.acked_input = carried
        for i in self.inputs:
            if i[0] <= self.acked_input:
                self.acked_after[i[0]] = self.applied
        self.inputs = [i for i in self.inputs if i[0] > self.acked_input]

    def handle_datagram(self, data):
        self.stats["packets_in"] += 1
        try:
            version, conn_id, seq, ack, ack_bits = dec_header(data)
        except Malformed:
            self.stats["malformed"] += 1
            return
        if version != VERSION:
            if self.state == "handshaking":
                raise Failed("version_mismatch (server speaks %d)" % version)
            self.stats["malformed"] += 1
            return
        try:
            frames = dec_server_frames(data[HEADER_LEN:])
        except Malformed as e:
            self.stats["malformed"] += 1
            self.log("malformed packet dropped: %s" % e)
            return
        kinds = [f[0] for f in frames]

        if seq == 0:
            # Untracked: only a Disconnect counts.
            for kind, value in frames:
                if kind == "disconnect" and (self.state == "handshaking" or conn_id == self.conn_id):
                    self.disconnect_reason = value
                    raise Failed("disconnected: %s" % REASONS.get(value, "unknown reason %d" % value))
            return

        if self.state == "handshaking":
            welcome = None
            for kind, value in frames:
                if kind == "welcome" and value["nonce"] == self.nonce and value["conn_id"] == conn_id != 0:
                    welcome = value
            if welcome is None:
                self.stats["dropped_before_welcome"] += 1
                return
            self._on_welcome(welcome)
        elif conn_id != self.conn_id:
            return

        if "wrong_direction" in kinds:
            raise Failed("protocol violation: a client-to-server frame from the server")
        if not self._rx_is_new(seq):
            self.stats["dropped_duplicate"] += 1
            return
        for kind, value in frames:
            if kind == "batch" and value[0] > self.applied + self.welcome["window"]:
                self.stats["dropped_beyond_window"] += 1
                return
        # The packet is accepted: acknowledgements, then its frames.
        self._rx_record(seq)
        self.last_heard = time.monotonic()
        self._on_acks(ack, ack_bits)
        if any(k in ACK_ELICITING for k in kinds):
            self.must_send = True
        for kind, value in frames:
            if kind == "batch":
                self._buffer_part(*value)
            elif kind == "refused":
                for seq, index, reason in value:
                    key = (seq, index)
                    if key in self.recent_refusals:
                        self.stats["repeated_refusals"] += 1
                        continue
                    self.recent_refusals.append(key)
                    del self.recent_refusals[:-REFUSALS_REMEMBERED]
                    self.refusals[key] = REFUSAL_REASONS.get(reason, "unknown reason %d" % reason)
            elif kind == "pong":
                self.pongs += 1
            elif kind == "disconnect":
                self.disconnect_reason = value
                self.state = "closed"
            elif kind == "welcome":
                self.stats["welcomes"] += 1
        self._apply_ready()

    def _on_welcome(self, w):
        self.welcome = w
        self.conn_id = w["conn_id"]
        self.applied = w["tick"]
        self.state = "connected"
        self.log("welcome: entity %d at tick %d" % (w["entity"], w["tick"]))

    def _buffer_part(self, tick, part, parts, digest, payload):
        if tick <= self.applied:
            self.stats["repeated_parts"] += 1
            return  # a repeat of an applied tick
        slot = self.parts.setdefault(tick, {"parts": parts, "digest": digest, "got": {}})
        if slot["parts"] != parts or slot["digest"] != digest:
            raise Failed("tick %d: parts disagree on parts/digest" % tick)
        slot["got"].setdefault(part, payload)

    def _apply_ready(self):
        while True:
            slot = self.parts.get(self.applied + 1)
            if slot is None or len(slot["got"]) < slot["parts"]:
                return
            tick = self.applied + 1
            rejected = []
            for p in range(slot["parts"]):
                try:
                    self.view, rej = apply_part(self.view, slot["got"][p], self.stats)
                except Malformed as e:
                    raise Failed("tick %d part %d rejected: %s" % (tick, p, e))
                rejected += rej
                self.stats["parts_applied"] += 1
            del self.parts[tick]
            self.applied = tick
            self.digests[tick] = slot["digest"]
            if rejected:
                self.rejections[tick] = rejected

    # -- the loop

    def recv_all(self):
        while True:
            try:
                data, addr = self.sock.recvfrom(65536)
            except BlockingIOError:
                break
            if addr != self.server:
                continue
            if self.loss and self.rng.random() < self.loss:
                self.stats["lost_in"] += 1
                continue
            copies = 2 if self.dup and self.rng.random() < self.dup else 1
            self.stats["dup_in"] += copies - 1
            for _ in range(copies):
                if self.reorder and self.rng.random() < self.reorder:
                    self.stats["held_in"] += 1
                    self.held.append((time.monotonic() + self.rng.uniform(0.02, 0.15), data))
                else:
                    self.handle_datagram(data)
        now = time.monotonic()
        due = [d for t, d in self.held if t <= now]
        self.held = [(t, d) for t, d in self.held if t > now]
        for data in due:
            self.handle_datagram(data)

    def wait(self, seconds):
        select.select([self.sock], [], [], max(0.0, seconds))

    def connect(self, timeout=IDLE_TIMEOUT):
        start = time.monotonic()
        next_hello = start
        while self.state == "handshaking":
            now = time.monotonic()
            if now - start > timeout:
                raise Failed("handshake_timeout")
            if now >= next_hello:
                self.send_hello()
                next_hello = now + HELLO_INTERVAL
            self.wait(min(0.01, next_hello - now))
            self.recv_all()
        if self.must_send:
            self.send_packet()

    def service(self):
        """One turn: read, answer, keep alive. Returns False when closed."""
        self.recv_all()
        now = time.monotonic()
        if self.state == "closed":
            return False
        if now - self.last_heard > IDLE_TIMEOUT:
            raise Failed("idle_timeout")
        ping = now - self.last_ping >= KEEPALIVE_INTERVAL
        if self.must_send or ping:
            self.send_packet(ping=ping)
        return True

    def bye(self):
        until = time.monotonic() + CLOSE_TIMEOUT
        while self.state != "closed" and time.monotonic() < until:
            try:
                self.send_packet(extra=bytes([BYE]))
                self.wait(0.1)
                self.recv_all()
            except Failed:
                break
        return self.disconnect_reason


# ------------------------------------------------------------------ probes

def _exchange(server, datagram, wait=0.4):
    """Sends one datagram from a fresh address; returns what came back."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.sendto(datagram, server)
        answers = []
        until = time.monotonic() + wait
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return answers
            ready, _, _ = select.select([sock], [], [], left)
            if ready:
                answers.append(sock.recvfrom(65536)[0])
    finally:
        sock.close()


def _untracked_disconnect(data):
    """[conn_id, reason, length] of an untracked packet holding only a Disconnect."""
    try:
        version, conn_id, seq, ack, ack_bits = dec_header(data)
        frames = dec_server_frames(data[HEADER_LEN:])
    except Malformed as e:
        return "malformed: %s" % e
    if version != VERSION or seq != 0 or ack != 0 or ack_bits != 0:
        return "not an untracked v2 packet: %s" % data.hex()
    if [f[0] for f in frames] != ["disconnect"]:
        return "frames %s" % frames
    return [conn_id, REASONS.get(frames[0][1], frames[0][1]), len(data)]


def probes(server):
    """Checks what the document says the server answers before a connection.

    Each probe is a datagram from a new address; returns
    {name: {"expected": ..., "got": ..., "ok": bool}}.
    """
    results = {}

    def check(name, expected, got):
        results[name] = {"expected": expected, "got": got, "ok": expected == got}

    nonce = int.from_bytes(os.urandom(8), "little")
    hello = enc_header(0, 1, 0, 0) + enc_hello(nonce)
    # A Hello shorter than 64 bytes is ignored.
    check("short_hello_ignored", [], _exchange(server, hello))
    # A Hello of version 1 (header and field) is answered with an untracked
    # Disconnect(version_mismatch): conn_id 0, seq 0, ack 0, ack_bits 0,
    # never more bytes than it received.
    v1 = bytearray(hello)
    v1[2] = 1
    v1[HEADER_LEN + 1] = 1
    v1 += bytes(HELLO_MIN_DATAGRAM - len(v1))
    got = [_untracked_disconnect(a) for a in _exchange(server, bytes(v1))]
    check("version_1_hello", [[0, "version_mismatch", 21]], got)
    # A v2 header whose Hello says version 1: the same answer.
    v1_field = bytearray(hello + bytes(HELLO_MIN_DATAGRAM - len(hello)))
    v1_field[HEADER_LEN + 1] = 1
    got = [_untracked_disconnect(a) for a in _exchange(server, bytes(v1_field))]
    check("hello_field_version_1", [[0, "version_mismatch", 21]], got)
    # A datagram shorter than the 21-byte answer of another version: silence.
    check("short_other_version_unanswered", [], _exchange(server, bytes(v1[:20])))
    # A packet that is not a Hello from an unknown address: an untracked
    # Disconnect(unknown_connection) echoing its conn_id.
    stray = enc_header(0x01020304, 1, 0, 0) + enc_ack(0) + enc_ping(1) + bytes(8)
    got = [_untracked_disconnect(a) for a in _exchange(server, stray)]
    check("unknown_connection", [[0x01020304, "unknown_connection", 21]], got)
    # ... but not to a datagram shorter than that answer.
    check("short_stray_unanswered", [], _exchange(server, stray[:20]))

    # Protocol violations on a connection: the server closes it with an
    # untracked Disconnect(protocol_violation) bearing its conn_id.
    def violation(name, first, second=None):
        c = Client(server, random.Random(0))
        got = None
        try:
            c.connect()
            first_seq = c.next_seq
            c.send_packet(extra=first)
            if second is not None:
                # Once the first packet is acknowledged.
                until = time.monotonic() + 1.0
                while first_seq in c.sent and time.monotonic() < until and c.service():
                    c.wait(0.005)
                c.send_packet(extra=second)
            until = time.monotonic() + 1.0
            while time.monotonic() < until and c.service():
                c.wait(0.005)
        except Failed as e:
            got = str(e)
        finally:
            c.sock.close()
        check(name, "disconnected: protocol_violation", got)

    # A frame of the wrong direction (a Pong from the client).
    violation("wrong_direction_frame", bytes([PONG]) + enc_varint(1))
    # An Input whose first_seq is above the next one the server expects (0).
    violation("input_seq_gap", enc_input([(5, 100000, [])]))
    # An entry whose tick is not above the last delivered one.
    violation("input_tick_not_increasing", enc_input([(0, 100000, [])]),
              enc_input([(1, 100000, [])]))
    return results


# ---------------------------------------------------------------- the walk

def first_life(server, rng, log, seconds):
    """Connects, runs `seconds`, then stops without a Bye (a game that
    crashed) and reads nothing for 200 ms; returns its socket, whose buffer
    holds the server's packets for the old connection, and what it was."""
    client = Client(server, rng, log)
    client.connect()
    until = time.monotonic() + seconds
    while time.monotonic() < until and client.service():
        client.wait(0.005)
    time.sleep(0.2)
    return client.sock, {"entity": client.welcome["entity"], "conn_id": client.conn_id,
                  "welcome_tick": client.welcome["tick"], "last_tick": client.applied}


def run(server, seconds, seed, log, net=None, restart=False):
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    earlier = None
    sock = None
    if restart:
        # The game restarts on the same port: the new Hello (another nonce)
        # ends the old connection, whose packets still in flight must be
        # dropped before the new Welcome.
        sock, earlier = first_life(server, rng, log, 1.0)
    client = Client(server, rng, log, net, sock)
    client.connect()
    # A repeated Hello (same nonce, no token) on the accepted connection
    # makes the server send the Welcome again.
    client.send_hello(repeat=True)
    w = client.welcome
    me = w["entity"]
    spawn = w["spawn"]
    limits = w["limits"]
    max_speed = limits.get("max_speed", 1 << 16)  # raw units per second
    lo_x, lo_y = w["origin_x"], w["origin_y"]
    hi_x = lo_x + w["cell_size"] * w["width_cells"]
    hi_y = lo_y + w["cell_size"] * w["height_cells"]

    # Walk at a fifth of max_speed, one Move per tick interval × 2.
    step_s = 2 * w["tick_interval_us"] / 1e6
    speed = max_speed // 5
    step = int(speed * step_s)
    pos = (spawn["x"], spawn["y"])          # the last accepted position
    heading = rng.randrange(4)
    dirs = [(1, 0, 0), (0, 1, 16384), (-1, 0, 32768), (0, -1, 49152)]
    moves = []                               # what we sent, and its fate

    def send(kind, cmd, target):
        seq = client.queue_input([cmd])
        if seq is None:
            return False
        moves.append({"input_seq": seq, "kind": kind, "tick_label": client.last_input_tick,
                      "sent_after_tick": client.applied, "command": cmd,
                      "from": list(pos), "target": target})
        return True

    # The distance rule at its edge, which no timing can blur: the allowance
    # starts full and never grows past max_speed × burst, so the first Move
    # may cover exactly floor(max_speed_raw × burst_us / 1e6) raw units from
    # the spawn and not one more. Both along x, towards the middle.
    if "max_speed" in limits and "burst_us" in limits:
        edge = max_speed * limits["burst_us"] // 1000000
        sign = 1 if spawn["x"] < (lo_x + hi_x) // 2 else -1
        for kind, dist in (("edge_too_fast", edge + 1), ("edge", edge)):
            tx = spawn["x"] + sign * dist
            if send(kind, {"kind": CMD_MOVE, "id": me, "x": tx, "y": spawn["y"], "dir": 0,
                           "speed": speed}, [tx, spawn["y"]]) and kind == "edge":
                pos = (tx, spawn["y"])

    start = time.monotonic()
    next_move = start + step_s
    illegal_at = {int(seconds * 0.3 / step_s): "too_fast",
                  int(seconds * 0.5 / step_s): "bad_speed",
                  int(seconds * 0.6 / step_s): "other_entity",
                  int(seconds * 0.7 / step_s): "despawn"}
    n = 0
    while time.monotonic() - start < seconds:
        if not client.service():
            break
        now = time.monotonic()
        if now >= next_move:
            next_move += step_s
            n += 1
            bad = illegal_at.get(n)
            if bad == "too_fast":
                # A jump of one and a half times the whole distance allowance
                # (max_speed × burst), to a place inside the world.
                burst = limits.get("burst_us", 1000000)
                dist = max_speed * burst * 3 // 2 // 1000000
                for tx, ty in ((pos[0] + dist, pos[1]), (pos[0] - dist, pos[1]),
                               (pos[0], pos[1] + dist), (pos[0], pos[1] - dist)):
                    if lo_x <= tx < hi_x and lo_y <= ty < hi_y:
                        break
                send(bad, {"kind": CMD_MOVE, "id": me, "x": tx, "y": ty, "dir": 0,
                           "speed": speed}, [tx, ty])
            elif bad == "bad_speed":
                tx = pos[0] + 1 if pos[0] + 1 < hi_x else pos[0] - 1
                send(bad, {"kind": CMD_MOVE, "id": me, "x": tx, "y": pos[1], "dir": 0,
                           "speed": max_speed + 65536}, [tx, pos[1]])
            elif bad == "other_entity":
                # A Move naming another entity: the protocol must drop it.
                other = me + 1 if me > 1 else me + 2
                send(bad, {"kind": CMD_MOVE, "id": other, "x": pos[0], "y": pos[1], "dir": 0,
                           "speed": 0}, list(pos))
            elif bad == "despawn":
                send(bad, {"kind": CMD_DESPAWN, "id": me}, None)
            else:
                # A legal step; turn when the next one would leave the world
                # (keeping a margin of one cell), or now and then.
                if rng.random() < 0.1:
                    heading = rng.randrange(4)
                for _ in range(4):
                    ux, uy, d = dirs[heading]
                    nx, ny = pos[0] + ux * step, pos[1] + uy * step
                    if lo_x + w["cell_size"] <= nx < hi_x - w["cell_size"] and \
                            lo_y + w["cell_size"] <= ny < hi_y - w["cell_size"]:
                        break
                    heading = (heading + 1) % 4
                if send("legal", {"kind": CMD_MOVE, "id": me, "x": nx, "y": ny, "dir": d,
                                  "speed": speed}, [nx, ny]):
                    pos = (nx, ny)
        client.wait(min(0.005, max(0.0, next_move - time.monotonic())))

    # Let the last inputs be acknowledged, and the refusals of the illegal
    # ones arrive (they may come after the ticks that follow), before
    # leaving (bounded).
    def waiting():
        return client.inputs or any((m["input_seq"], 0) not in client.refusals
                                    for m in moves if m["kind"] not in ("legal", "edge"))
    until = time.monotonic() + 2.0
    while waiting() and time.monotonic() < until and client.service():
        client.wait(0.005)
    final_tick = client.applied
    final_view = {str(e[0]): {"x": e[1], "y": e[2], "dir": e[3], "speed": e[4], "layers": e[5]}
                  for e in client.view.entries}
    reason = client.bye()
    for m in moves:
        m["acked"] = m["input_seq"] <= client.acked_input
        m["acked_after_tick"] = client.acked_after.get(m["input_seq"])
        m["refused"] = client.refusals.get((m["input_seq"], 0))
    w_out = dict(w)
    w_out["nonce"] = "%016x" % w["nonce"]
    return {
        "entity": me,
        "welcome": w_out,
        "last_tick": final_tick,
        "view": final_view,
        "digests": {str(t): "%016x" % d for t, d in sorted(client.digests.items())},
        "rejections": {str(t): r for t, r in client.rejections.items()},
        "moves": moves,
        "unacked_inputs": len(client.inputs),
        "disconnect": REASONS.get(reason, reason),
        "stats": client.stats,
        "pongs": client.pongs,
        "earlier_life": earlier,
    }


# -------------------------------------------------------------- self test

def self_test():
    """The document's examples, byte for byte."""
    def hx(s):
        return bytes.fromhex(s.replace(" ", "").replace("\n", ""))

    assert enc_varint(0) == hx("00") and enc_varint(127) == hx("7f")
    assert enc_varint(128) == hx("80 01") and enc_varint(300) == hx("ac 02")
    assert enc_svarint(-1) == hx("01")
    assert enc_svarint(2 * 65536) == hx("80 80 10") and enc_svarint(-3 * 65536) == hx("ff ff 17")
    for bad in ("80 00", "ff ff ff ff ff ff ff ff ff 02", "80"):
        try:
            Reader(hx(bad)).varint()
        except Malformed:
            pass
        else:
            raise AssertionError("accepted " + bad)

    pkt = hx("4c 47 02 78 56 34 12 2a 00 00 00 11 00 00 00 0b 00 00 00 12 63 11 ad 02 00 01 "
             "ef cd ab 89 67 45 23 01 04 00 00 00 00")
    assert dec_header(pkt) == (2, 0x12345678, 42, 17, 0b1011)
    frames = dec_server_frames(pkt[HEADER_LEN:])
    assert frames == [("pong", 99), ("batch", (301, 0, 1, 0x0123456789abcdef, hx("00000000")))]
    assert enc_header(0x12345678, 42, 17, 0b1011) == pkt[:HEADER_LEN]

    assert enc_hello(0x0102030405060708, b"secret") == hx(
        "01 02 08 07 06 05 04 03 02 01 06 73 65 63 72 65 74")
    move = {"kind": CMD_MOVE, "id": 1001, "x": 12 * 65536 + 32768, "y": -3 * 65536,
            "dir": 16384, "speed": 2 * 65536}
    assert enc_input([(7, 301, [move]), (8, 303, [{"kind": CMD_DESPAWN, "id": 1001}])]) == hx(
        "02 07 02 ad 02 01 01 e9 07 80 80 64 ff ff 17 80 80 01 80 80 10 01 01 02 e9 07")

    wel = hx("10 f8 ac d1 91 01 08 07 06 05 04 03 02 01 e9 07 ac 02 d0 86 03 64 ff ff ff c7 01 "
             "ff ff ff c7 01 80 80 a0 06 40 40 00 00 80 08 ff ff af 09 80 80 c0 02 00 00 01 "
             "80 80 a0 06 01 ff ff ff ff 0f 07 80 80 c0 0c c0 84 3d a0 01")
    [(kind, w)] = dec_server_frames(wel)
    assert kind == "welcome"
    assert (w["conn_id"], w["nonce"], w["entity"], w["tick"]) == (0x12345678, 0x0102030405060708, 1001, 300)
    assert (w["tick_interval_us"], w["window"]) == (50000, 100)
    assert (w["origin_x"], w["origin_y"], w["cell_size"]) == (-3200 * 65536, -3200 * 65536, 100 * 65536)
    assert (w["width_cells"], w["height_cells"], w["visibility"], w["hysteresis"], w["max_view"]) == \
        (64, 64, 0, 0, 1024)
    assert w["spawn"] == {"x": -150 * 65536, "y": 40 * 65536, "dir": 0, "speed": 0, "observer": 1,
                          "radius": 100 * 65536, "layers": 1, "interest": 0xFFFFFFFF}
    assert w["limits"] == {"max_speed": 200 * 65536, "burst_us": 1000000, "moves_per_sec": 160}

    others = {"00": ("padding",), "03 ac 02": enc_ack(300), "04 c0 84 3d": enc_ping(1000000),
              "05": bytes([BYE])}
    for text, value in others.items():
        if value != ("padding",):
            assert value == hx(text), text
    assert dec_server_frames(hx("12 c0 84 3d 13 02 00")) == [("pong", 1000000), ("disconnect", 2)]
    assert dec_server_frames(hx("14 02 07 00 03 ac 02 02 02")) == [("refused", [(7, 0, 3), (300, 2, 2)])]
    for bad in ("14 00", "14 01 07 20 03"):    # no refusal; command index 32
        try:
            dec_server_frames(hx(bad))
        except Malformed:
            pass
        else:
            raise AssertionError("accepted " + bad)

    v = View()
    v, rej = apply_part(v, hx("00 00 02 02 80 80 50 80 80 a0 01 00 00 01 02 80 80 10 ff ff 0f "
                               "5a 80 80 0c 03 00"))
    assert rej == [] and v.entries == [[2, 10 * 65536, 20 * 65536, 0, 0, 1],
                                       [5, 12 * 65536, 18 * 65536, 90, 98304, 3]]
    v, rej = apply_part(v, hx("01 01 13 01 00 00 01 01 80 80 04 00"))
    assert rej == [(1, 1, 3)]
    assert v.entries == [[5, 12 * 65536 + 32768, 18 * 65536, 90, 98304, 3]]
    v, rej = apply_part(v, hx("00 00 00 01 00 80 80 a0 01 ff ff 21 b4 01 00"))
    assert rej == []
    assert v.entries == [[5, 20 * 65536, -4 * 65536 - 16384, 180, 0, 3]]
    # The checks the document lists.
    for bad in ("00 01 01 00 00",          # leave index outside the view (index 1 of 1)
                "00 00 01 05 00 00 00 00 00 00",  # enter of visible 5
                "00 00 00 01 01 00 00",    # zero position delta
                "00 00 00 01 09 00 00",    # update index outside the view
                "00 00 00 00 00"):         # bytes after the update section
        try:
            apply_part(v, hx(bad))
        except Malformed:
            pass
        else:
            raise AssertionError("accepted part " + bad)
    assert apply_part(View(), hx("00 00 00 00"))[0].entries == []
    print("self-test: all document examples pass")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", help="HOST:PORT of lockgrid serve")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--out", help="write the JSON report here (default: stdout)")
    ap.add_argument("--seed", type=int, help="seed of the walk (the nonce is always random)")
    ap.add_argument("--loss", type=float, default=0.0,
                    help="drop this fraction of datagrams each way (simulated loss)")
    ap.add_argument("--dup", type=float, default=0.0,
                    help="send and receive this fraction of datagrams twice")
    ap.add_argument("--reorder", type=float, default=0.0,
                    help="hold this fraction of received datagrams back 20-150 ms")
    ap.add_argument("--self-test", action="store_true", help="check the document's examples")
    ap.add_argument("--restart", action="store_true",
                    help="first connect and vanish without a Bye, then start again on the same port")
    ap.add_argument("--probes", action="store_true",
                    help="first check the server's answers before a connection")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    if not args.server:
        ap.error("--server is required")
    host, port = args.server.rsplit(":", 1)
    log = (lambda m: print(m, file=sys.stderr)) if args.verbose else None
    try:
        server = (host, int(port))
        found = probes(server) if args.probes else None
        net = {"loss": args.loss, "dup": args.dup, "reorder": args.reorder}
        report = run(server, args.seconds, args.seed, log, net, args.restart)
        if found is not None:
            report["probes"] = found
    except Failed as e:
        print("lockgrid_client: failed: %s" % e, file=sys.stderr)
        return 1
    text = json.dumps(report, indent=1, sort_keys=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
