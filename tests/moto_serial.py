"""`python -m moto.server`, its requests taken one at a time (tests/helpers_s3.start_s3 runs this).

moto (5.2.5, `S3Response.put_object`) checks a conditional PutObject's `If-None-Match: *` or
`If-Match` and then writes, with no lock between, so two concurrent creates of one key can both
succeed; on S3 a conditional write is atomic and exactly one does. One request at a time, each sees
the writes before it, as on S3: a test of a claim or lease race then tests Freshet's protocol, not
moto's threads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto import server

_LOCK = threading.Lock()
_CALL = server.DomainDispatcherApplication.__call__


def _one_at_a_time(self: Any, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    with _LOCK:  # the body too: moto builds it in memory
        return list(_CALL(self, environ, start_response))


server.DomainDispatcherApplication.__call__ = _one_at_a_time  # type: ignore[method-assign]

if __name__ == "__main__":
    server.main()
