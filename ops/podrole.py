"""On Kubernetes with a standby (`replicas: 2` in the Helm chart, ops/README.md): the pod labels
itself `freshet/role: leader` or `standby`, so the chart's Service sends producers' POSTs, the
API and Prometheus's scrapes to the daemon that holds the warehouse lease only, while both pods
count as ready for rollouts and the PodDisruptionBudget (`/readyz?standby=ok`).

The label is a JSON merge patch of the pod's own object through the API server, with the pod's
service account token (the chart's Role allows `get` and `patch` on pods in the namespace). It
runs in a thread of its own; a failure is logged and tried again every `retry` seconds until the
role changes, never raised: the lease, not the label, keeps one writer per warehouse.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["LABEL", "PodRole"]

log = logging.getLogger("freshet")

LABEL = "freshet/role"
ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class PodRole:
    """`set(role)` labels this pod (`FRESHET_POD_NAME` in `FRESHET_POD_NAMESPACE`, from the
    downward API); without those variables it does nothing (not on Kubernetes, or one replica)."""

    def __init__(self, env: dict[str, str] | None = None, api: str | None = None, account: Path = ACCOUNT,
                 retry: float = 5.0) -> None:
        env = dict(os.environ) if env is None else env
        self.pod, self.namespace = env.get("FRESHET_POD_NAME"), env.get("FRESHET_POD_NAMESPACE")
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
        self.api = api or (f"https://{host}:{port}" if host else None)
        self.account = account
        self.retry = retry
        self.role: str | None = None  # the last role asked for
        self.labelled: str | None = None  # the last role the API server accepted
        self._lock = threading.Lock()
        self._changed = threading.Event()

    @property
    def enabled(self) -> bool:
        return bool(self.pod and self.namespace and self.api)

    def set(self, role: str) -> threading.Thread | None:
        """Label the pod `role` in the background (the thread, to join in tests; None if off)."""
        if not self.enabled or role == self.role:
            return None
        self.role = role
        self._changed.set()
        t = threading.Thread(target=self._patch, args=(role,), name="freshet-pod-role", daemon=True)
        t.start()
        return t

    def _patch(self, role: str) -> None:
        with self._lock:  # one request at a time: the last role asked for is the one left
            self._changed.clear()
            while role == self.role:
                try:
                    self._request(role)
                except OSError as e:  # urllib's HTTPError and URLError among them
                    detail = e.read().decode(errors="replace")[:300] if isinstance(e, urllib.error.HTTPError) else ""
                    log.warning("could not label this pod %s=%s (tried again in %g s): %s %s", LABEL, role,
                                self.retry, e, detail, extra={"pod": self.pod, "namespace": self.namespace})
                    if self._changed.wait(self.retry):
                        return
                    continue
                self.labelled = role
                log.info("pod labelled", extra={"pod": self.pod, "label": f"{LABEL}={role}"})
                return

    def _request(self, role: str) -> None:
        url = f"{self.api}/api/v1/namespaces/{self.namespace}/pods/{self.pod}"
        body = json.dumps({"metadata": {"labels": {LABEL: role}}}).encode()
        req = urllib.request.Request(url, data=body, method="PATCH",
                                     headers={"Content-Type": "application/merge-patch+json"})
        token = self.account / "token"
        if token.is_file():
            req.add_header("Authorization", f"Bearer {token.read_text().strip()}")
        context = None
        if url.startswith("https:"):
            ca = self.account / "ca.crt"
            context = ssl.create_default_context(cafile=str(ca) if ca.is_file() else None)
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            r.read()
