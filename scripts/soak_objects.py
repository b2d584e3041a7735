"""The soak's actions for what clients own on the daemon and for the newer ways in (scripts/soak.py
mixes them with its own): resident tensors made, used, kept as results and freed, or left to
expire; streams finished, abandoned to the idle sweep, or sent a bad part and deleted; chunked
bodies whole and cut off; stacks of matrices; and gRPC calls, unary and a stream cancelled with
requests in flight (where tritonclient.grpc is installed and the daemon has a gRPC port).

Each action returns the HTTP status it got (0: a connection dropped on purpose; gRPC calls map
OK to 200 and anything else to 500, which the soak counts as bad); valid results are checked
against NumPy through load.check."""

import io
import socket
import uuid

import numpy as np

RAW = "application/octet-stream"
NPY = "application/x-npy"
# the daemon flags these actions need: quick expiry, so abandoned objects are freed while it runs
DAEMON_FLAGS = ["--tensor-idle-s", "3", "--stream-idle-s", "3"]


def npy(a):
    f = io.BytesIO()
    np.save(f, a)
    return f.getvalue()


class ObjectLoad:
    """Mixed into soak.py's Load: needs self.s, self.base, self.port, self.rng, self.check, and
    self.grpc_port (None: no gRPC)."""

    def object_actions(self):
        acts = [(2, self.tensor_cycle), (0.5, self.tensor_abandoned), (1, self.stream_cycle),
                (0.3, self.stream_abandoned), (0.5, self.stream_bad_part), (1, self.chunked_hist),
                (0.3, self.chunked_cut), (1, self.stack_checked)]
        if self.grpc_port and grpc_client_available():
            acts += [(1, self.grpc_infer), (0.3, self.grpc_stream_cancelled)]
        return acts

    # -- resident tensors -------------------------------------------------------------------------
    def tensor_cycle(self):
        """Made, named as an operand, its result kept as a tensor and read back, both freed."""
        m, k, n = (int(x) for x in self.rng.integers(1, 40, 3))
        a = self.rng.uniform(-1, 1, (m, k)).astype(np.float32)
        w = self.rng.uniform(-1, 1, (k, n)).astype(np.float32)
        name = f"soak-{uuid.uuid4().hex[:12]}"
        r = self.s.post(self.base + f"/v1/tensors?name={name}", data=npy(w), headers={"Content-Type": NPY}, timeout=60)
        if r.status_code != 201:
            return r.status_code
        try:
            r = self.s.post(self.base + "/v1/gemm", json={"a": a.tolist(), "b": {"tensor": name},
                                                          "output": {"tensor": {}}}, timeout=60)
            if r.status_code != 200:
                return r.status_code
            kept = r.json()["result"]["tensor"]["id"]
            got = self.s.get(self.base + f"/v1/tensors/{kept}", headers={"Accept": NPY}, timeout=60)
            self.s.delete(self.base + f"/v1/tensors/{kept}", timeout=60)
            if got.status_code == 200:
                self.check("tensor_cycle", np.load(io.BytesIO(got.content)), a.astype(np.float64) @ w)
            return got.status_code
        finally:
            self.s.delete(self.base + f"/v1/tensors/{name}", timeout=60)

    def tensor_abandoned(self):
        """Made from generated numbers and never freed: the idle sweep (--tensor-idle-s 3) does it."""
        return self.s.post(self.base + "/v1/tensors", json={"random": {"shape": [64, 64], "seed": 1}},
                           timeout=60).status_code

    # -- streams ----------------------------------------------------------------------------------
    def open_stream(self, cols):
        r = self.s.post(self.base + "/v1/jobs", json={"op": "ata", "stream": True, "cols": cols}, timeout=60)
        return r.json()["id"] if r.status_code == 201 else None, r.status_code

    def put_part(self, jid, seq, data):
        return self.s.put(self.base + f"/v1/jobs/{jid}/parts/{seq}", data=data, headers={"Content-Type": RAW},
                          timeout=60).status_code

    def stream_cycle(self):
        """Parts in any order, one sent twice (acknowledged once), finished and checked."""
        cols = int(self.rng.integers(1, 16))
        jid, status = self.open_stream(cols)
        if not jid:
            return status
        blocks = [self.rng.standard_normal((int(self.rng.integers(1, 50)), cols)).astype(np.float32) for _ in range(3)]
        for seq in (2, 0, 1, 0):
            status = self.put_part(jid, seq, blocks[seq].tobytes())
            if status != 200:
                self.s.delete(self.base + f"/v1/jobs/{jid}", timeout=60)
                return status
        r = self.s.post(self.base + f"/v1/jobs/{jid}/finish", timeout=60)
        if r.status_code not in (200, 202):
            return r.status_code
        for _ in range(500):
            st = self.s.get(self.base + f"/v1/jobs/{jid}", timeout=60).json().get("status")
            if st in ("done", "failed", "cancelled"):
                break
        r = self.s.get(self.base + f"/v1/jobs/{jid}/result", headers={"Accept": NPY}, timeout=60)
        if r.status_code == 200:
            a = np.vstack(blocks).astype(np.float64)
            self.check("stream_cycle", np.load(io.BytesIO(r.content)), a.T @ a)
        return r.status_code

    def stream_abandoned(self):
        """One part, then nothing: the stream fails stream_idle after --stream-idle-s and is freed."""
        jid, status = self.open_stream(8)
        return self.put_part(jid, 0, np.ones((10, 8), np.float32).tobytes()) if jid else status

    def stream_bad_part(self):
        """A part that is not whole rows is a 400 for the part; the stream is then deleted."""
        jid, status = self.open_stream(8)
        if not jid:
            return status
        status = self.put_part(jid, 0, b"\0" * 30)
        self.s.delete(self.base + f"/v1/jobs/{jid}", timeout=60)
        return status

    # -- chunked bodies ---------------------------------------------------------------------------
    def chunked_hist(self):
        data = self.rng.integers(0, 256, int(self.rng.integers(1, 300_000)), dtype=np.uint8)
        step = 65536
        chunks = (data[i:i + step].tobytes() for i in range(0, len(data), step))  # requests sends it chunked
        r = self.s.post(self.base + "/v1/histogram", data=chunks, headers={"Content-Type": RAW}, timeout=60)
        if r.status_code == 200:
            self.check("chunked_hist", np.asarray(r.json()["result"]["counts"]), np.bincount(data, minlength=256))
        return r.status_code

    def chunked_cut(self):
        """A chunked AtA body hung up on in the middle of a chunk."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(b"POST /v1/ata?dtype=float32&cols=4 HTTP/1.1\r\nHost: soak\r\n"
                      b"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"10000\r\n" + self.rng.bytes(4096))
        return 0

    # -- stacks -----------------------------------------------------------------------------------
    def stack_checked(self):
        p, m, k, n = (int(x) for x in self.rng.integers(1, 12, 4))
        a = self.rng.uniform(-1, 1, (p, m, k)).astype(np.float32)
        b = self.rng.uniform(-1, 1, (1, k, n)).astype(np.float32)  # broadcast over the stack
        r = self.s.post(self.base + "/v1/gemm", json={"a": {"shape": list(a.shape), "data": a.ravel().tolist()},
                                                      "b": b.tolist()}, headers={"Accept": NPY}, timeout=60)
        if r.status_code == 200:
            self.check("stack_checked", np.load(io.BytesIO(r.content)), np.matmul(a.astype(np.float64), b))
        return r.status_code

    # -- gRPC -------------------------------------------------------------------------------------
    def grpc(self):
        if getattr(self, "_grpc", None) is None:
            import tritonclient.grpc as tg
            self._grpc = tg.InferenceServerClient(f"127.0.0.1:{self.grpc_port}")
        return self._grpc

    def grpc_infer(self):
        import tritonclient.grpc as tg
        from tritonclient.utils import InferenceServerException
        m, k, n = (int(x) for x in self.rng.integers(1, 40, 3))
        a = self.rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = self.rng.uniform(-1, 1, (k, n)).astype(np.float32)
        ins = [tg.InferInput("a", [m, k], "FP32"), tg.InferInput("b", [k, n], "FP32")]
        ins[0].set_data_from_numpy(a)
        ins[1].set_data_from_numpy(b)
        try:
            got = self.grpc().infer("gemm", ins, client_timeout=60).as_numpy("c")
        except InferenceServerException:
            return 500
        self.check("grpc_infer", got, a.astype(np.float64) @ b)
        return 200

    def grpc_stream_cancelled(self):
        """A ModelStreamInfer stream with requests in flight, closed without waiting for them."""
        import tritonclient.grpc as tg
        c = tg.InferenceServerClient(f"127.0.0.1:{self.grpc_port}")
        try:
            c.start_stream(callback=lambda result, error: None)
            a = np.ones((32, 32), np.float32)
            for i in range(8):
                ins = [tg.InferInput("a", [32, 32], "FP32"), tg.InferInput("b", [32, 32], "FP32")]
                ins[0].set_data_from_numpy(a)
                ins[1].set_data_from_numpy(a)
                c.async_stream_infer("gemm", ins, request_id=str(i))
            c.stop_stream(cancel_requests=True)
        finally:
            c.close()
        return 0


def grpc_client_available():
    try:
        import tritonclient.grpc  # noqa: F401
        return True
    except ImportError:
        return False
