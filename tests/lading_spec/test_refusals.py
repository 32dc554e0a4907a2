"""The API server's refusal found in Spark's output (fabric8's KubernetesClientException)."""

from __future__ import annotations

from lading_spec.refusals import refusal

FORBIDDEN = (
    '26/12/02 10:20:01 WARN ExecutorPodsSnapshotsStoreImpl: Exception when notifying snapshot subscriber.\n'
    'io.fabric8.kubernetes.client.KubernetesClientException: Failure executing: POST at: '
    'https://kubernetes.default.svc/api/v1/namespaces/team-a/pods. Message: pods is forbidden: User '
    '"system:serviceaccount:team-a:lading-spark" cannot create resource "pods" in API group "" in the namespace '
    '"team-a". Received status: Status(apiVersion=v1, code=403, details=StatusDetails(causes=[], group=null, '
    'kind=pods, name=null, retryAfterSeconds=null, uid=null, additionalProperties={}), kind=Status, message=pods '
    'is forbidden: ..., reason=Forbidden, status=Failure, additionalProperties={}).\n'
    '\tat io.fabric8.kubernetes.client.KubernetesClientException.copyAsCause(KubernetesClientException.java:205)\n')
QUOTA = ('Exception in thread "main" io.fabric8.kubernetes.client.KubernetesClientException: Failure executing: '
         'POST at: https://10.244.0.1:6443/api/v1/namespaces/n-1/pods. Message: pods "cj-driver" is forbidden: '
         'exceeded quota: small, requested: requests.memory=1408Mi, used: requests.memory=0, limited: '
         'requests.memory=1000Mi. Received status: Status(apiVersion=v1, code=403, ...).')


def test_a_missing_permission_is_named_with_its_verb_resource_and_account() -> None:
    assert refusal(FORBIDDEN) == (
        'Kubernetes refused POST /api/v1/namespaces/team-a/pods: pods is forbidden: User '
        '"system:serviceaccount:team-a:lading-spark" cannot create resource "pods" in API group "" in the '
        'namespace "team-a"')


def test_a_quota_is_named_with_what_it_limits() -> None:
    found = refusal("log line\n" * 200 + QUOTA + "\nShutdown hook called\n")
    assert found == ('Kubernetes refused POST /api/v1/namespaces/n-1/pods: pods "cj-driver" is forbidden: exceeded '
                     'quota: small, requested: requests.memory=1408Mi, used: requests.memory=0, limited: '
                     'requests.memory=1000Mi')


def test_the_first_refusal_counts_and_none_is_none() -> None:
    assert refusal(FORBIDDEN + QUOTA).startswith("Kubernetes refused POST /api/v1/namespaces/team-a/pods")  # type: ignore[union-attr]
    assert refusal("ERROR SparkContext: Error initializing SparkContext.\njava.lang.OutOfMemoryError") is None
