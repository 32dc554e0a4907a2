"""Test harness: a Kubernetes API server emulator on 127.0.0.1 (never shipped).

``admission`` is the client of ``crd-check --serve`` (kube-apiserver's own custom
resource write path: pruning, defaulting, schema and CEL validation, update strategy);
``kube`` is the HTTP server and its object store, which admits custom resources through
it; ``client`` a small synchronous client for tests; ``fixtures`` the pytest fixtures
(``kube`` and ``kube_namespace``) registered from the root conftest;
``spark_operator`` the stand-in for spark-operator and the kubelet.
"""
