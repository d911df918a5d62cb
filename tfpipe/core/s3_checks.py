"""What tfpipe checks before its first s3:// request, so that a bad setup fails in one line, at once.

tensorflow-io's S3 client (AWS SDK for C++) does not fail fast: without credentials it asks
the EC2 metadata service, retrying for ~25 s on every request; an endpoint that does not
answer costs 10 retries (~25 s) per request, and its connect timeout is 5 minutes. A listing
of a few hundred files would then take hours instead of failing. So, once per process:
  - the connect and stall timeouts are bounded (S3_CONNECT_TIMEOUT_MSEC, S3_REQUEST_TIMEOUT_MSEC:
    10 s unless set; tensorflow-io's defaults are 5 minutes each);
  - an S3_ENDPOINT must accept a connection (3 s);
  - some source of credentials must exist (environment, ~/.aws files, a container or web
    identity, or an instance metadata service that answers).
And at exit, where the SDK's teardown aborts the interpreter ("pure virtual method called"),
the process ends with its own status instead (see `_end_without_sdk_teardown`).
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

from tfpipe.errors import DataError

CONNECT_TIMEOUT_MSEC = "10000"  # 10 s (tensorflow-io's default: 5 minutes, times 10 retries)
STALL_TIMEOUT_MSEC = "10000"  # 10 s without a byte (the same default: 5 minutes)
_PROBE_SECONDS = 3.0
_METADATA = ("169.254.169.254", 80)  # the EC2 instance metadata service (instance-role credentials)
_CREDENTIAL_VARIABLES = ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                         "AWS_CONTAINER_CREDENTIALS_FULL_URI")
_FIX = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE with ~/.aws/credentials), "
        "or run where an instance or container role provides them")
_ended = False


def check_before_first_use(path: str) -> None:
    """Raises DataError (one line, naming `path` and the fix) for an endpoint down or no credentials."""
    os.environ.setdefault("S3_CONNECT_TIMEOUT_MSEC", CONNECT_TIMEOUT_MSEC)  # read at the first request
    # The AWS SDK's request timeout is a stall timeout (no byte for that long), not a limit on a
    # transfer: a request whose answer got lost is retried after 10 s instead of waiting 5 minutes.
    os.environ.setdefault("S3_REQUEST_TIMEOUT_MSEC", STALL_TIMEOUT_MSEC)
    endpoint = os.environ.get("S3_ENDPOINT")
    if endpoint:
        host, port = _host_port(endpoint)
        if not _connects(host, port, _PROBE_SECONDS):
            raise DataError(f"{path}: the S3 endpoint {endpoint} (S3_ENDPOINT) does not answer; start the "
                            f"server or fix S3_ENDPOINT")
    if not has_credentials():
        raise DataError(f"{path}: no AWS credentials found for S3: {_FIX}")
    _end_without_sdk_teardown()


def has_credentials() -> bool:
    """True when the AWS SDK has somewhere to take credentials from (without asking the network, if it can)."""
    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return True
    if any(env.get(v) for v in _CREDENTIAL_VARIABLES):
        return True
    home = os.path.expanduser("~")
    files = (env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws", "credentials"),
             env.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config"))
    if any(os.path.isfile(f) for f in files):
        return True
    if env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return False
    return _connects(*_METADATA, 0.3)  # an EC2 instance role


def _host_port(endpoint: str) -> tuple[str, int]:
    secure = os.environ.get("S3_USE_HTTPS", "1") not in ("0", "false", "False")
    parts = urlsplit(endpoint if "://" in endpoint else f"{'https' if secure else 'http'}://{endpoint}")
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def _connects(host: str, port: int, timeout: float) -> bool:
    try:
        socket.create_connection((host, port), timeout).close()
        return True
    except OSError:
        return False


def _end_without_sdk_teardown() -> None:
    """Has the process end with its own status, before the AWS SDK's teardown can abort it (once).

    glibc's on_exit hands the status given to exit() to libc's own _exit, registered after the
    SDK's static objects: Python has finished (atexit handlers, flushed streams) when exit()
    runs the C handlers, newest first, so _exit ends the process before the SDK's destructors,
    whose abort would turn every status into -6. Where on_exit is missing (not glibc), nothing.
    """
    global _ended
    if _ended:
        return
    _ended = True
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.on_exit.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        libc.on_exit(ctypes.cast(libc._exit, ctypes.c_void_p), None)  # _exit(status, arg): arg ignored
    except (OSError, AttributeError):
        pass
