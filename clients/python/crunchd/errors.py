"""The daemon's error answers as exceptions.

Every error crunchd sends is JSON, ``{"error": {"code", "message", "field"?}}``, with the status
the problem deserves (api/openapi.yaml, ``components.schemas.ErrorCode``). Each code maps to one
class below; the status decides for answers without a code (a proxy's 502, libmicrohttpd's HTML
431).
"""

__all__ = [
    "CrunchdError", "InvalidRequest", "UnknownKernel", "Unauthorized", "NotFound", "NotDone",
    "JobCancelled", "TooLarge", "ShapeMismatch", "NonFiniteResult", "Overloaded", "DeviceError",
    "DeadlineExceeded", "ServerError", "JobTimeout", "Conflict", "SharedMemoryLimit",
    "error_from_response",
]


class CrunchdError(Exception):
    """An error answer of the daemon (or, for JobTimeout, of the client's own wait).

    status: the HTTP status (None for client-side errors); code: the error code of the contract
    (``shape_mismatch``, ``queue_full``, ...; None when the body was not crunchd's JSON); field:
    the request field at fault (``"b"``, ``"a.data[3]"``, ``"kernel"``) or None; message: for a
    human; retry_after: seconds from the Retry-After header (429/503) or None; response: the
    requests.Response, when there was one.
    """

    def __init__(self, message, status=None, code=None, field=None, retry_after=None,
                 response=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.retry_after = retry_after
        self.response = response

    @property
    def job_id(self):
        """X-Crunchd-Job-Id of the answer, where the daemon had made a job."""
        if self.response is None:
            return None
        return self.response.headers.get("X-Crunchd-Job-Id")

    def __str__(self):
        head = " ".join(str(p) for p in (self.status, self.code) if p is not None)
        text = f"{head}: {self.message}" if head else str(self.message)
        return text + (f" (field {self.field!r})" if self.field else "")


class InvalidRequest(CrunchdError):
    """400 family: invalid_json, missing_field, invalid_field, non_finite, unsupported,
    invalid_parameter; also 405, 411, 415 and 431. Fix the request; retrying will not help."""


class UnknownKernel(InvalidRequest):
    """400 unknown_kernel: no such kernel for this op on this backend (see Client.kernels())."""


class ShapeMismatch(InvalidRequest):
    """422 shape_mismatch: the shapes do not conform; ``field`` names the operand."""


class Unauthorized(CrunchdError):
    """401: bearer token missing or wrong (Client(token=...))."""


class NotFound(CrunchdError):
    """404: no such route, or the job is unknown, expired, deleted or on another replica."""


class NotDone(CrunchdError):
    """409 not_done: the job's result was asked for before it finished."""


class JobCancelled(CrunchdError):
    """409 cancelled: the job was cancelled."""


class TooLarge(CrunchdError):
    """413 too_large: over a size limit of GET /v1/info (or the memory budget, whole)."""


class NonFiniteResult(CrunchdError):
    """422 non_finite_result: the result overflowed and JSON cannot carry Inf/NaN. The client
    asks again for .npy by itself when its transport is "auto"."""


class Conflict(CrunchdError):
    """409 already_exists or in_use: a resident tensor or shared-memory region of that name
    exists, or a running request holds the region being unregistered (try again once it is
    answered)."""


class TensorLimit(CrunchdError):
    """507 tensor_limit: keeping the tensor would pass --tensor-max-mb or this client's
    --tensor-client-max-mb; no other tensor is ever dropped to make room: delete some."""


class SharedMemoryLimit(CrunchdError):
    """507 shm_limit: registering would pass --shm-max-mb or the region count; unregister some."""


class Overloaded(CrunchdError):
    """429/503 queue_full, memory_budget, draining, host_memory: refused before the job ran,
    with Retry-After. The client retries these (see Retry) before raising."""


class DeviceError(CrunchdError):
    """503 device_fault (a sticky device error: the daemon exits to be restarted) or 507
    device_memory (the job does not fit the device)."""


class DeadlineExceeded(CrunchdError):
    """504 deadline_exceeded: the job's timeout_ms (or the daemon's --job-timeout-ms) passed."""


class ServerError(CrunchdError):
    """500 internal, or another 5xx without a known code."""


class JobTimeout(CrunchdError, TimeoutError):
    """Job.wait()/Job.result() gave up before the job finished (client side: the job goes on)."""


_BY_CODE = {
    "invalid_json": InvalidRequest,
    "missing_field": InvalidRequest,
    "invalid_field": InvalidRequest,
    "non_finite": InvalidRequest,
    "unsupported": InvalidRequest,
    "invalid_parameter": InvalidRequest,
    "invalid_encoding": InvalidRequest,
    "origin_not_allowed": InvalidRequest,
    "method_not_allowed": InvalidRequest,
    "length_required": InvalidRequest,
    "unsupported_media_type": InvalidRequest,
    "unknown_kernel": UnknownKernel,
    "unauthorized": Unauthorized,
    "not_found": NotFound,
    "not_done": NotDone,
    "cancelled": JobCancelled,
    "too_large": TooLarge,
    "shape_mismatch": ShapeMismatch,
    "non_finite_result": NonFiniteResult,
    "queue_full": Overloaded,
    "draining": Overloaded,
    "memory_budget": Overloaded,
    "host_memory": Overloaded,
    "device_fault": DeviceError,
    "device_memory": DeviceError,
    "deadline_exceeded": DeadlineExceeded,
    "already_exists": Conflict,
    "in_use": Conflict,
    "shm_limit": SharedMemoryLimit,
    "tensor_limit": TensorLimit,
    "internal": ServerError,
}

_BY_STATUS = {
    400: InvalidRequest, 401: Unauthorized, 404: NotFound, 405: InvalidRequest, 409: NotDone,
    411: InvalidRequest, 413: TooLarge, 415: InvalidRequest, 422: InvalidRequest,
    429: Overloaded, 431: InvalidRequest, 503: Overloaded, 504: DeadlineExceeded,
    507: DeviceError,
}


def parse_retry_after(value):
    """Seconds from a Retry-After header: delta-seconds or an HTTP date; None if absent/bad."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        import email.utils
        import time
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def error_from_response(r):
    """The exception for an error answer (a requests.Response with status >= 400)."""
    code = field = None
    message = None
    try:
        body = r.json()
        e = body.get("error") if isinstance(body, dict) else None
        if isinstance(e, dict):
            code, field, message = e.get("code"), e.get("field"), e.get("message")
        elif isinstance(e, str):  # the KServe v2 shape
            message = e
    except ValueError:
        pass
    if message is None:
        message = (r.text or r.reason or "").strip()[:300] or f"HTTP {r.status_code}"
    cls = _BY_CODE.get(code) or _BY_STATUS.get(r.status_code) or \
        (ServerError if r.status_code >= 500 else CrunchdError)
    return cls(message, status=r.status_code, code=code, field=field or None,
               retry_after=parse_retry_after(r.headers.get("Retry-After")), response=r)
