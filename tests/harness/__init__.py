"""Test harness: a real Kubernetes control plane and what stands around it (never shipped).

``control_plane`` starts etcd, kube-apiserver and kube-controller-manager (the shared
``tools/kube`` binaries) on 127.0.0.1; ``fixtures`` the pytest fixtures (``kube``,
``kube_namespace``, ``operator_identity``, ``standin_identity``) registered from the root
conftest; ``identities`` the operator's, spark-operator's and tenants' RBAC (the chart's
own, rendered); ``client`` a small synchronous client for tests (TLS, bearer tokens);
``spark_operator`` the stand-in for spark-operator and the kubelet; ``admission`` the
client of ``crd-check --serve`` (the API server's custom-resource write path, for unit
tests that validate CRDs and examples without a server); ``api_proxy`` a proxy that puts
faults (500s, delays, held answers, cut watches) between one client and the real server;
``own_control_plane`` etcd and kube-apiserver started by our own code, for tests that
restart the API server or compact etcd.
"""
