"""Resident tensors: arrays kept on the daemon (in device memory on a GPU) between requests, named
by id or by a name of the client's own, used as operands and as outputs without crossing the
wire again (POST/GET/DELETE /v1/tensors)."""

import numpy as np


class Tensor:
    """A handle to an array the daemon keeps for this client: pass it wherever an array goes
    (``c.gemm(x, w)`` with ``w = c.upload(weights)``), or as ``out=`` to write a result into it.

    id, name (None when unnamed), shape (tuple), dtype (numpy dtype), nbytes, device (a device
    index, or "host"), expires_at (Unix time: it is freed after --tensor-idle-s unused; each use
    moves it on), instance (the daemon that holds it). download() (or np.asarray(t)) fetches its
    data; delete() frees it (a job already holding it finishes first). As a context manager it
    is deleted on exit."""

    def __init__(self, client, info):
        self._client = client
        self._update(info)

    def _update(self, info):
        self.id = info["id"]
        self.name = info.get("name") or None
        self.shape = tuple(int(d) for d in info["shape"])
        self.dtype = np.dtype(info["dtype"]) if info["dtype"] != "bfloat16" else info["dtype"]
        self.nbytes = int(info["bytes"])
        self.device = info.get("device")
        self.expires_at = info.get("expires_at")
        self.instance = info.get("instance")

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape))

    @property
    def ref(self):
        """What a request body names it by."""
        return self.id

    def refresh(self):
        """Reads its metadata again (not a use: the idle clock runs on); returns self."""
        self._update(self._client._request("GET", f"/v1/tensors/{self.id}").json())
        return self

    def download(self):
        """Its data as a new numpy array (a use)."""
        return self._client._download_tensor(self.id)

    def delete(self):
        """Frees it; raises NotFound when it is gone already."""
        self._client._request("DELETE", f"/v1/tensors/{self.id}")

    def __array__(self, dtype=None, copy=None):
        a = self.download()
        return a if dtype is None else a.astype(dtype)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        from .errors import NotFound
        try:
            self.delete()
        except NotFound:
            pass

    def __eq__(self, other):
        return isinstance(other, Tensor) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        name = f" {self.name!r}" if self.name else ""
        return f"<crunchd.Tensor{name} {self.dtype}{list(self.shape)} on {self.device} id={self.id}>"


def output_field(keep, out):
    """The JSON body's "output" for keep= (True or a name: a new tensor) and out= (a Tensor, id
    or name to write into); None when the answer carries the data."""
    if out is not None and keep not in (None, False):
        raise ValueError("give keep= (a new tensor) or out= (an existing one), not both")
    if out is not None:
        return {"tensor": out.id if isinstance(out, Tensor) else str(out)}
    if keep is True:
        return {"tensor": {}}
    if isinstance(keep, str):
        return {"tensor": {"name": keep}}
    if keep not in (None, False):
        raise TypeError("keep must be True, False or a name")
    return None
