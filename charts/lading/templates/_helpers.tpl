{{/* Names, labels and the RBAC rule lists shared by the templates. */}}

{{- define "lading.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lading.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lading.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lading.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lading.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "lading.labels" -}}
helm.sh/chart: {{ include "lading.chart" . }}
{{ include "lading.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: lading
{{- end }}

{{- define "lading.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lading.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "lading.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Namespaces where the Spark driver ServiceAccount and Role are created. */}}
{{- define "lading.jobNamespaces" -}}
{{- if .Values.spark.jobNamespaces }}
{{- join "," (uniq .Values.spark.jobNamespaces) }}
{{- else if .Values.watch.namespaces }}
{{- join "," (uniq .Values.watch.namespaces) }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{- define "lading.policyFile" -}}
/etc/lading/policy/policy.yaml
{{- end }}

{{/*
The operator's rules: the same list for the ClusterRole (cluster-wide mode) and for
the Role in each watched namespace. docs/security.md lists them; tests/chart checks.
Nothing on Secrets: credentials reach Spark pods by envFrom, resolved by the kubelet.
*/}}
{{- define "lading.operatorRules" -}}
# Our resources: read and watch them; kopf merge-patches them (it removes the
# lading.io/finalizer an older release left). No `update`: nothing rewrites a spec.
- apiGroups: ["lading.io"]
  resources: ["copyjobs", "streamcopies", "compactions"]
  verbs: ["get", "list", "watch", "patch"]
# ttlSecondsAfterFinished: the operator deletes a finished CopyJob (k8s.delete_resource).
# Only CopyJob has the field (crds/); tests/chart/test_chart_operator_api.py checks.
- apiGroups: ["lading.io"]
  resources: ["copyjobs"]
  verbs: ["delete"]
# Their status subresource: phase, response, conditions (merge-patch only, k8s.patch_status).
- apiGroups: ["lading.io"]
  resources: ["copyjobs/status", "streamcopies/status", "compactions/status"]
  verbs: ["patch"]
# ownerReferences with blockOwnerDeletion on the SparkApplications we create.
- apiGroups: ["lading.io"]
  resources: ["copyjobs/finalizers", "streamcopies/finalizers", "compactions/finalizers"]
  verbs: ["update"]
# The runs: create, follow, delete (cancel, history limits, ttl).
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications"]
  verbs: ["create", "get", "list", "watch", "delete"]
# The driver pods: their termination message carries the result. Watched (label selector
# spark-role=driver,lading.io/kind), and read by name when the watch has not shown it ended.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
# Events on our resources: kopf and the operator both POST core/v1 Events, never patch them.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- if .Values.networkPolicy.enabled }}
# Each run's own NetworkPolicy, owned by its SparkApplication (lading_operator.netpol); the
# garbage collector deletes it with the application, the operator never updates or deletes one.
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["create"]
{{- end }}
{{- end }}

{{/*
The leader-election Lease (lading_operator.election, k8s.get_lease/create_lease/replace_lease):
read it, create it when absent, renew or take it over with a resourceVersion-conditional
update. In a Role in the release namespace only; no delete, list or watch.
*/}}
{{- define "lading.leaderElectionRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
{{- end }}

{{/*
The Spark driver's rules in each job namespace: what Spark on Kubernetes needs to run
executors (create/watch/delete executor pods, the executor ConfigMap, and the
label-selected clean-up at stop, which is a deletecollection in Spark 4's client).
The driver Service and driver ConfigMap are created by spark-operator, not the driver;
the driver only deletes its Service at stop (spark.kubernetes.driver.service.deleteOnTermination).
*/}}
{{- define "lading.sparkRules" -}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["create", "get", "list", "watch", "delete", "deletecollection"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create", "get", "list", "delete", "deletecollection"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "delete", "deletecollection"]
{{- if .Values.spark.rbac.persistentVolumeClaims }}
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["create", "get", "list", "delete", "deletecollection"]
{{- end }}
{{- end }}

{{/*
Tenant rules (docs/security.md#tenant-access): read lading resources (aggregated into
`view`, hence into `edit` and `admin` too), and write them (aggregated into `edit` and
`admin`). Creating one runs Spark pods in the namespace, which `edit` may do anyway.
*/}}
{{- define "lading.userViewRules" -}}
- apiGroups: ["lading.io"]
  resources: ["copyjobs", "streamcopies", "compactions", "copyjobs/status", "streamcopies/status", "compactions/status"]
  verbs: ["get", "list", "watch"]
{{- end }}

{{- define "lading.userEditRules" -}}
- apiGroups: ["lading.io"]
  resources: ["copyjobs", "streamcopies", "compactions"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
{{- end }}

{{/*
Checks values.schema.json cannot express (it compares no two values and sees no computed
names); deployment.yaml includes it, so `helm template` and `helm install` refuse early.
*/}}
{{- define "lading.validate" -}}
{{- $election := .Values.operator.leaderElection }}
{{- if and (gt (int .Values.operator.replicas) 1) (not $election.enabled) }}
{{- fail (printf "operator.replicas is %v but operator.leaderElection.enabled is false: two operators without leader election would both reconcile every resource; enable leader election or set operator.replicas=1" .Values.operator.replicas) }}
{{- end }}
{{- if and $election.enabled (not (and (lt (float64 $election.retryPeriodSeconds) (float64 $election.renewDeadlineSeconds)) (lt (float64 $election.renewDeadlineSeconds) (float64 $election.leaseDurationSeconds)))) }}
{{- fail (printf "operator.leaderElection: expected retryPeriodSeconds (%v) < renewDeadlineSeconds (%v) < leaseDurationSeconds (%v): a leader must give up before its lease runs out" $election.retryPeriodSeconds $election.renewDeadlineSeconds $election.leaseDurationSeconds) }}
{{- end }}
{{- if and (hasKey .Values.policy "enabled") (not .Values.policy.enabled) }}
{{- fail "policy.enabled=false is no longer supported: the policy always applies, and its defaults are the safe ones (s3:// only, no file://, the chart's image and Spark ServiceAccount, a small job's size). Remove policy.enabled and widen what you need with policy.allowedPrefixes, policy.images, policy.serviceAccounts, policy.sparkConf and policy.limits (docs/security.md#defaults-and-what-each-widening-costs)" }}
{{- end }}
{{- if eq (int .Values.metrics.port) (int .Values.operator.healthPort) }}
{{- fail (printf "metrics.port and operator.healthPort are both %v: /metrics and kopf's /healthz listen on separate ports in the same container (the operator would stop with \"address already in use\"); give them different ports" .Values.metrics.port) }}
{{- end }}
{{- if .Values.metrics.service.enabled }}
{{- $service := printf "%s-metrics" (include "lading.fullname" .) }}
{{- if gt (len $service) 63 }}
{{- fail (printf "the metrics Service name %q is %d characters; Kubernetes allows 63: set fullnameOverride to at most 55 characters (or use a shorter release name), or set metrics.service.enabled=false" $service (len $service)) }}
{{- end }}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $service) }}
{{- fail (printf "the metrics Service name %q is not a DNS-1035 label (lowercase letters, digits and '-', starting with a letter): set fullnameOverride accordingly" $service) }}
{{- end }}
{{- end }}
{{- end }}
