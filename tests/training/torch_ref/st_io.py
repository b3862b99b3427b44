"""A minimal safetensors reader and writer in numpy, written from the format's
description (8-byte little-endian header length, JSON header, raw little-endian data),
independent of the C++ implementation it is used to check."""
import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "I64": np.int64, "F64": np.float64, "I32": np.int32}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def write(path, tensors, metadata=None):
    """tensors: dict name -> numpy array (float32 or int64). Written in name order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.asarray(tensors[name])  # (not ascontiguousarray: it turns shape () into (1,))
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
        header[name] = {"dtype": _NAMES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read(path):
    """Returns (dict name -> numpy array, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        dt = np.dtype(_DTYPES[h["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(data[base + b:base + e], dtype=dt).reshape(h["shape"]).copy()
    return out, meta
