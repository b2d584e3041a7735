"""Bytes on the wire: .npy bodies and multipart forms built without copying the arrays, .npy
answers read straight into a new array, Server-Timing parsed."""

import io
import uuid

import numpy as np

_READ_CHUNK = 1 << 20


class Body:
    """A request body made of buffers, sent one after the other (no concatenated copy).

    requests sees its length (Content-Length is set, as raw uploads require) and iterates it;
    it can be iterated again when a request is retried."""

    def __init__(self, chunks):
        self.chunks = [c if isinstance(c, bytes) else memoryview(c).cast("B") for c in chunks]
        self.length = sum(len(c) for c in self.chunks)

    def __len__(self):
        return self.length

    def __iter__(self):
        return iter([c for c in self.chunks if len(c)])

    def tobytes(self):
        return b"".join(bytes(c) for c in self.chunks)


def npy_chunks(arr):
    """[header, data] of arr as a .npy file (version 1.0), with no copy of a contiguous array:
    C order as it is, a Fortran-ordered array as fortran_order (crunchd reads it as its
    transpose)."""
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        arr = np.ascontiguousarray(arr)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(arr))
    fortran = arr.flags.f_contiguous and not arr.flags.c_contiguous
    data = arr.T if fortran else arr
    return [header.getvalue(), memoryview(data).cast("B") if data.size else b""]


def npy_body(arr):
    return Body(npy_chunks(arr))


def multipart_body(parts):
    """multipart/form-data of {name: array} as .npy files, as `curl -F a=@a.npy` sends them.
    Returns (Body, content_type)."""
    boundary = "crunchd-" + uuid.uuid4().hex
    chunks = []
    for name, arr in parts.items():
        chunks.append((f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; "
                       f"filename=\"{name}.npy\"\r\nContent-Type: application/octet-stream"
                       "\r\n\r\n").encode())
        chunks.extend(npy_chunks(arr))
        chunks.append(b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode())
    return Body(chunks), f"multipart/form-data; boundary={boundary}"


def _read_exact(raw, n):
    out = bytearray()
    while len(out) < n:
        chunk = raw.read(n - len(out))
        if not chunk:
            raise EOFError(f".npy answer ended after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


class _Reader:
    """The minimal file object numpy's header reader needs, over a urllib3 response."""

    def __init__(self, raw):
        self.raw = raw

    def read(self, n):
        return _read_exact(self.raw, n)


def read_npy(r):
    """The .npy body of a streamed requests.Response as a new, writable array: the header is
    parsed, the array allocated once, and the body read into it a MiB at a time."""
    f = _Reader(r.raw)
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f".npy version {version} in the answer")
        if dtype.hasobject:
            raise ValueError("object dtype in a .npy answer")
        out = np.empty(shape[::-1] if fortran else shape, dtype=dtype)
        view = memoryview(out).cast("B") if out.size else memoryview(b"")
        pos = 0
        while pos < len(view):
            chunk = r.raw.read(min(_READ_CHUNK, len(view) - pos))
            if not chunk:
                raise EOFError(f".npy answer ended after {pos} of {len(view)} data bytes")
            view[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
        return out.T if fortran else out
    finally:
        r.close()


def parse_server_timing(value):
    """'receive;dur=0.05, queue;dur=0.01, ...' -> {"receive": 0.05, "queue": 0.01, ...} (ms)."""
    out = {}
    for part in (value or "").split(","):
        items = [p.strip() for p in part.split(";")]
        if not items[0]:
            continue
        for p in items[1:]:
            if p.startswith("dur="):
                try:
                    out[items[0]] = float(p[4:])
                except ValueError:
                    pass
    return out
