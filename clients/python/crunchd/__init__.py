"""crunchd: a Python client for the crunchd daemon (GEMM, AᵀA and histograms over HTTP).

    import numpy as np, crunchd
    c = crunchd.Client("http://localhost:8080")
    r = c.gemm(np.ones((64, 32), np.float32), np.ones((32, 16), np.float32))
    r.result, r.kernel, r.timings          # the 64×16 matrix, the kernel that ran, ms per phase
    counts, edges = c.histogram(x, bins=50, range=(-3, 3))
    job = c.submit("ata", a=big); job.wait(60); job.result().result
    w = c.upload(weights, name="w")        # kept on the daemon (GPU memory): sent once
    y = c.gemm(x, w).result                # w named, not sent; keep=True keeps y there too

Small arrays travel as JSON, big ones as .npy (multipart for GEMM, application/x-npy, raw bytes
for uint8 histograms), answers likewise; errors are typed (crunchd.errors), 429/503 refusals
are retried after Retry-After.
"""

__version__ = "0.1.0"

from .client import (DEFAULT_JSON_THRESHOLD, TRANSPORTS, Client, Crunchd, HistogramResult, Job,
                     Result, Retry, Tensor)
from .errors import (Conflict, CrunchdError, DeadlineExceeded, DeviceError, InvalidRequest, JobCancelled,
                     JobTimeout, NonFiniteResult, NotDone, NotFound, Overloaded, ServerError,
                     ShapeMismatch, SharedMemoryLimit, TensorLimit, TooLarge, Unauthorized, UnknownKernel)

__all__ = [
    "Client", "Crunchd", "Retry", "Result", "HistogramResult", "Job", "Tensor", "DEFAULT_JSON_THRESHOLD",
    "TRANSPORTS", "CrunchdError", "InvalidRequest", "UnknownKernel", "ShapeMismatch",
    "Unauthorized", "NotFound", "NotDone", "JobCancelled", "TooLarge", "NonFiniteResult",
    "Overloaded", "DeviceError", "DeadlineExceeded", "ServerError", "JobTimeout", "Conflict",
    "SharedMemoryLimit", "TensorLimit",
]
