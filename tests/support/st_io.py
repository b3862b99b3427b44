"""A minimal safetensors reader and writer in numpy, written from the format's
description (8-byte little-endian header length, JSON header, raw little-endian data),
independent of the C++ implementation it is used to check."""
import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "I64": np.int64, "F64": np.float64, "I32": np.int32}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def write_raw(path, entries, metadata=None):
    """entries: list of (name, dtype name, shape, raw little-endian bytes), in file order."""
    header, offset = {}, 0
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    if metadata:
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for entry in entries:
            f.write(entry[3])


def read_raw(path):
    """Returns (dict name -> (dtype name, shape, raw bytes), metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        out[name] = (h["dtype"], h["shape"], data[8 + n + b:8 + n + e])
    return out, meta


def write(path, tensors, metadata=None):
    """tensors: dict name -> numpy array (float32 or int64). Written in name order."""
    entries = []
    for name in sorted(tensors):
        a = np.asarray(tensors[name])  # (not ascontiguousarray: it turns shape () into (1,))
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
        entries.append((name, _NAMES[a.dtype], a.shape, raw))
    write_raw(path, entries, metadata)


def read(path):
    """Returns (dict name -> numpy array, metadata dict)."""
    raw, meta = read_raw(path)
    out = {}
    for name, (dtype, shape, data) in raw.items():
        dt = np.dtype(_DTYPES[dtype]).newbyteorder("<")
        out[name] = np.frombuffer(data, dtype=dt).reshape(shape).copy()
    return out, meta
