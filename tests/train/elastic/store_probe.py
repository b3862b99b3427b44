"""Reads an elastic job's rendezvous store (the one launch --elastic serves) from a test,
to gate on the membership protocol's own state instead of on timing.

  store_probe.py HOST PORT in-job ID [TIMEOUT_S]
      waits until process ID has arrived in the job: it is a member of the current
      generation, or registered in the list of the next one (a newcomer waiting for the
      members' next step boundary). Prints where; exit 1 after TIMEOUT_S (default 60).

The token is COMM_JOB_TOKEN (the job's; the test sets it before starting launch). Only
reads: the one key it may create is elastic/g<current+1>/arrived, with add 0, exactly
as the members' own check for waiting newcomers does (ElasticRendezvous::arrivals_waiting).
Wire protocol, handshake and records: comm/store/tcp_store_protocol.h, comm/store/job_token.cpp,
comm/net/record_stream.h (its own implementation here, with the `cryptography` package).
"""
import hashlib
import hmac
import os
import secrets
import socket
import struct
import sys
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

STORE_MAGIC = 0x53545044  # "DPTS"
AUTH_MAGIC = 0x41545044   # "DPTA"
AUTH_VERSION = 2
SET, GET, ADD, WAIT, CHECK = 1, 2, 3, 4, 5
OK = 0
AES_GCM, CHACHA = 1, 2
MAX_RECORD = 64 * 1024


def proof(token, label, transcript):
    return hmac.new(token, label + b"\0" + transcript, hashlib.sha256).digest()


class Direction:
    """One direction's records (comm/net/record_stream.h): u32 length | ciphertext, or the
    plaintext when only authenticating | 16-byte tag; the record number is the nonce."""

    def __init__(self, token, transcript, label, cipher, encrypt):
        okm = HKDF(algorithm=hashes.SHA256(), length=36, salt=transcript, info=label).derive(token or b"\0")
        self.aead = (AESGCM if cipher == AES_GCM else ChaCha20Poly1305)(okm[:32])
        self.prefix, self.seq, self.encrypt = okm[32:], 0, encrypt

    def _nonce(self):
        n = self.prefix + struct.pack(">Q", self.seq)
        self.seq += 1
        return n

    def seal(self, data):
        out = b""
        for at in range(0, len(data), MAX_RECORD):
            piece = data[at:at + MAX_RECORD]
            head = struct.pack("<I", len(piece))
            if self.encrypt:
                out += head + self.aead.encrypt(self._nonce(), piece, head)
            else:
                out += head + piece + self.aead.encrypt(self._nonce(), b"", head + piece)
        return out

    def open(self, head, body, tag):
        if self.encrypt:
            return self.aead.decrypt(self._nonce(), body + tag, head)
        self.aead.decrypt(self._nonce(), tag, head + body)  # raises InvalidTag
        return body


class Store:
    """The store's protocol (comm/store/tcp_store_protocol.h), written apart from the C++
    client: the client proves first, then every message travels in records."""

    def __init__(self, host, port, token, timeout=10.0):
        self.token = token.encode()
        self.sock = socket.create_connection((host, port), timeout=timeout)
        hello = struct.pack("<II", AUTH_MAGIC, AUTH_VERSION) + secrets.token_bytes(32) + bytes([1, AES_GCM, 0, 0])
        self.sock.sendall(hello)
        theirs = self._recv(44)
        magic, version = struct.unpack_from("<II", theirs)
        if magic != AUTH_MAGIC or version != AUTH_VERSION:
            raise RuntimeError("not a dpt store of this version (handshake magic/version)")
        transcript = hello + theirs
        self.sock.sendall(proof(self.token, b"dpt-store-client", transcript))
        try:
            server_proof = self._recv(32)
        except RuntimeError:
            raise RuntimeError("the store rejected our proof (another job, or another COMM_JOB_TOKEN)")
        if not hmac.compare_digest(proof(self.token, b"dpt-store-server", transcript), server_proof):
            raise RuntimeError("the store failed the job token check (another job, or another COMM_JOB_TOKEN)")
        encrypt = True  # we asked for it (byte 40 of our hello): either side asking is enough
        cipher = AES_GCM if theirs[41] == AES_GCM else CHACHA
        self.send = Direction(self.token, transcript, b"dpt-store-key client->server", cipher, encrypt)
        self.recv = Direction(self.token, transcript, b"dpt-store-key server->client", cipher, encrypt)
        self.plain = b""

    def _recv(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise RuntimeError("the store closed the connection")
            out += chunk
        return out

    def _recv_plain(self, n):
        while len(self.plain) < n:
            head = self._recv(4)
            (length,) = struct.unpack("<I", head)
            if length > MAX_RECORD:
                raise RuntimeError(f"record of {length} bytes from the store")
            body = self._recv(length)
            self.plain += self.recv.open(head, body, self._recv(16))
        out, self.plain = self.plain[:n], self.plain[n:]
        return out

    def _call(self, body):
        self.sock.sendall(self.send.seal(struct.pack("<II", STORE_MAGIC, len(body)) + body))
        magic, n = struct.unpack("<II", self._recv_plain(8))
        if magic != STORE_MAGIC:
            raise RuntimeError("malformed reply from the store")
        reply = self._recv_plain(n)
        if reply[0] != OK:
            raise RuntimeError(f"store reply status {reply[0]}")
        return reply[1:]

    @staticmethod
    def _str(s):
        b = s.encode()
        return struct.pack("<I", len(b)) + b

    def check(self, key):
        return self._call(bytes([CHECK]) + struct.pack("<I", 1) + self._str(key))[0] != 0

    def get(self, key):
        r = self._call(bytes([GET]) + struct.pack("<I", 1000) + self._str(key))
        (n,) = struct.unpack_from("<I", r)
        return r[4:4 + n].decode()

    def set(self, key, value):  # for tests that forge state (phantom_arrival.py); never used here
        self._call(bytes([SET]) + self._str(key) + self._str(value))

    def add(self, key, delta):
        return struct.unpack("<q", self._call(bytes([ADD]) + self._str(key) + struct.pack("<q", delta)))[0]


def where(store, ident):
    """'a member of generation g' / 'arrived in generation g, ...', or None."""
    if not store.check("elastic/current"):
        return None
    cur = int(store.get("elastic/current"))
    members = store.get(f"elastic/g{cur}/members")
    if any(line.split()[:2] == ["m", ident] for line in members.splitlines()):
        return f"a member of generation {cur}"
    nxt = cur + 1
    for i in range(store.add(f"elastic/g{nxt}/arrived", 0)):
        key = f"elastic/g{nxt}/arrival/{i}"
        if store.check(key) and store.get(key).split()[:1] == [ident]:
            return f"arrived in generation {nxt} (waiting for the members' next step boundary)"
    return None


def main():
    if len(sys.argv) not in (5, 6) or sys.argv[3] != "in-job":
        sys.exit(__doc__)
    host, port, ident = sys.argv[1], int(sys.argv[2]), sys.argv[4]
    timeout = float(sys.argv[5]) if len(sys.argv) == 6 else 60.0
    store = Store(host, port, os.environ.get("COMM_JOB_TOKEN", ""))
    deadline = time.monotonic() + timeout
    while True:
        w = where(store, ident)
        if w:
            print(f"store: {ident}: {w}")
            return
        if time.monotonic() > deadline:
            print(f"store: {ident} did not arrive within {timeout:g} s")
            sys.exit(1)
        time.sleep(0.02)


if __name__ == "__main__":
    main()
