"""Test harness: a Kubernetes API server emulator on 127.0.0.1 (never shipped).

``schema`` is the pure part (structural-schema pruning, defaulting, validation and
CEL rules, as the real API server applies them to custom resources); ``kube`` is the
HTTP server and its object store; ``client`` a small synchronous client for tests;
``fixtures`` the pytest fixtures (``kube`` and ``kube_namespace``) registered from
the root conftest.
"""
