"""The Kubernetes API server's refusal in Spark's output: the one sentence that says what to fix.

Spark talks to the API server through the fabric8 client (spark-submit creating the driver pod,
the driver creating its executors). A refused request surfaces as a ``KubernetesClientException``:
``Failure executing: POST at: https://…/api/v1/namespaces/NS/pods. Message: MESSAGE. Received
status: Status(…)``, where MESSAGE is the API server's own words: ``pods is forbidden: User
"system:serviceaccount:NS:SA" cannot create resource "pods" in API group "" in the namespace
"NS"`` (a permission the ServiceAccount's Role lacks), ``pods "x-driver" is forbidden: exceeded
quota: small, requested: requests.memory=1408Mi, …`` (a ResourceQuota). In a stack trace inside
hundreds of log lines, or after the driver exits with nothing but a code, it is lost;
:func:`refusal` finds it. Pure Python: the operator (a spark-submit failure's message) and the
driver pod (its own log) both use it.
"""

from __future__ import annotations

import re

# fabric8's KubernetesClientException message (its requestFailure): method, URL, the Status's message.
_FAILURE = re.compile(r"Failure executing: ([A-Z]+) at: (\S+?)\. Message: (.+?)\. Received status:")
_LIMIT = 1000


def refusal(text: str) -> str | None:
    """``Kubernetes refused METHOD PATH: MESSAGE`` for the first refused request in ``text``
    (``None`` when there is none). The path is the URL's, without the server: it names the kind
    and namespace; the server's address says nothing a user acts on."""
    found = _FAILURE.search(text)
    if found is None:
        return None
    method, url, message = found.groups()
    path = "/" + url.split("://", 1)[-1].split("/", 1)[-1] if "://" in url else url
    return f"Kubernetes refused {method} {path}: {message.strip()}"[:_LIMIT]
