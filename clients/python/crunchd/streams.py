"""Streams: an AᵀA or a histogram of data larger than one request (or than memory), sent in parts
over several connections (POST /v1/jobs {"stream": true}, PUT /v1/jobs/{id}/parts/{seq}, POST
/v1/jobs/{id}/finish). Each part is retried by its seq: the daemon counts a seq once, so a part
whose answer was lost is simply sent again."""

import concurrent.futures
import itertools
import sys
import threading
import time

import numpy as np
import requests

from .errors import CrunchdError, error_from_response

_RETRYABLE = {408, 429, 500, 502, 503, 504}


class _Progress:
    """tqdm where installed, else one line on stderr rewritten in place; silent when off."""

    def __init__(self, on, total, unit):
        self.on, self.total, self.unit, self.done, self.bar = on, total, unit, 0, None
        self.lock, self.t0, self.last = threading.Lock(), time.monotonic(), 0.0
        if on:
            try:
                import tqdm
                self.bar = tqdm.tqdm(total=total, unit="B", unit_scale=True, desc=unit)
            except ImportError:
                self.bar = None

    def add(self, n):
        if not self.on:
            return
        with self.lock:
            self.done += n
            if self.bar is not None:
                self.bar.update(n)
                return
            now = time.monotonic()
            if now - self.last < 0.2:
                return
            self.last = now
            rate = self.done / max(now - self.t0, 1e-9) / 1e6
            of = f" of {self.total / 1e6:.0f}" if self.total else ""
            print(f"\r{self.unit}: {self.done / 1e6:.0f}{of} MB, {rate:.0f} MB/s", end="", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.on:
            print(file=sys.stderr)


def _raw(a):
    a = np.ascontiguousarray(a)
    return memoryview(a).cast("B") if a.size else b""


class _Sender:
    """Parts over `connections` sessions of their own (requests' sessions are not thread-safe),
    at most 2 x connections parts in memory, each retried up to `retries` times by its seq."""

    def __init__(self, client, job_id, connections, retries, progress):
        self.client, self.job_id, self.retries, self.progress = client, job_id, retries, progress
        self.local = threading.local()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=connections)
        self.window = threading.Semaphore(2 * connections)
        self.futures = []

    def _session(self):
        s = getattr(self.local, "s", None)
        if s is None:
            s = self.local.s = requests.Session()
            s.headers.update(self.client.session.headers)
        return s

    def _put(self, seq, data, nbytes):
        url = f"{self.client.url}/v1/jobs/{self.job_id}/parts/{seq}"
        try:
            for attempt in range(self.retries + 1):
                try:
                    r = self._session().put(url, data=data, headers={"Content-Type": "application/octet-stream"},
                                            timeout=self.client.timeout, **self.client._tls)
                except requests.ConnectionError:
                    if attempt == self.retries:
                        raise
                    time.sleep(min(0.05 * 2 ** attempt, 2.0))
                    continue
                if r.status_code == 200:
                    self.progress.add(nbytes)
                    return r.json()
                err = error_from_response(r)
                busy = r.status_code == 409 and err.code == "in_use"  # our own earlier try still runs
                if (r.status_code not in _RETRYABLE and not busy) or attempt == self.retries:
                    raise err
                time.sleep(err.retry_after or min(0.05 * 2 ** attempt, 2.0))
        finally:
            self.window.release()

    def send(self, seq, data, nbytes):
        self.window.acquire()
        self.futures.append(self.pool.submit(self._put, seq, data, nbytes))
        done = [f for f in self.futures if f.done()]
        for f in done:  # a failed part stops the stream at once
            f.result()
        self.futures = [f for f in self.futures if not f.done()]

    def wait(self):
        try:
            for f in self.futures:
                f.result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def run_stream(client, spec, parts, connections=4, retries=3, progress=False, total=None, unit="stream",
               timeout=None, hist=None, accept_npy=None):
    """Opens a stream of spec, sends each (bytes-like, nbytes) of parts as seq 0, 1, ..., finishes
    it and returns its Result; a failure deletes the stream."""
    r = client._request("POST", "/v1/jobs", json_body=dict(spec, stream=True))
    job_id = r.json()["id"]
    bar = _Progress(progress, total, unit)
    sender = _Sender(client, job_id, max(1, int(connections)), int(retries), bar)
    try:
        for seq, (data, nbytes) in enumerate(parts):
            sender.send(seq, data, nbytes)
        sender.wait()
        client._request("POST", f"/v1/jobs/{job_id}/finish")
        from .client import Job
        return Job(client, job_id, op=spec["op"], accept_npy=accept_npy, hist=hist).result(timeout=timeout)
    except BaseException:
        try:
            client._request("DELETE", f"/v1/jobs/{job_id}")
        except (CrunchdError, requests.RequestException):
            pass
        raise
    finally:
        bar.close()


def ata_parts(arrays):
    """(first array's cols and dtype, the parts as raw rows); every array is rows x cols."""
    it = iter(arrays)
    try:
        first = np.asarray(next(it))
    except StopIteration:
        raise ValueError("ata_stream needs at least one part") from None
    if first.ndim != 2:
        raise ValueError(f"each part is a 2-D array of rows, got shape {first.shape}")
    dtype = np.float64 if first.dtype == np.float64 else np.float32
    cols = first.shape[1]

    def gen():
        for a in itertools.chain([first], it):
            a = np.asarray(a)
            if a.ndim != 2 or a.shape[1] != cols:
                raise ValueError(f"every part has {cols} columns, got shape {a.shape}")
            a = a.astype(dtype, copy=False)
            yield _raw(a), a.nbytes
    return cols, np.dtype(dtype), gen()


def histogram_parts(data, dtype, part_bytes):
    """The parts of a file (read in part_bytes pieces), bytes, an array, or an iterable of those."""
    if hasattr(data, "read"):
        def gen():
            step = part_bytes - part_bytes % dtype.itemsize
            while True:
                chunk = data.read(step)
                if not chunk:
                    return
                yield chunk, len(chunk)
        return gen()
    if isinstance(data, (bytes, bytearray, memoryview, np.ndarray)):
        data = [data]

    def gen_items():
        for item in data:
            if isinstance(item, (bytes, bytearray, memoryview)):
                yield item, len(item)
                continue
            a = np.asarray(item).astype(dtype, copy=False).reshape(-1)
            for i in range(0, a.size, max(1, part_bytes // dtype.itemsize)):
                piece = a[i:i + part_bytes // dtype.itemsize]
                yield _raw(piece), piece.nbytes
    return gen_items()
