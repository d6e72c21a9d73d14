{{/* The chart's name, the release's full name (resource names), labels. */}}
{{- define "pysched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pysched.fullname" -}}
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

{{- define "pysched.serviceAccountName" -}}
{{- default (include "pysched.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{- define "pysched.leaseName" -}}
{{- default (include "pysched.fullname" .) .Values.leaderElection.resourceName }}
{{- end }}

{{- define "pysched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pysched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end }}

{{- define "pysched.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "pysched.selectorLabels" . }}
app.kubernetes.io/part-of: pysched
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The ServiceAccount as an RBAC subject. */}}
{{- define "pysched.subject" -}}
- kind: ServiceAccount
  name: {{ include "pysched.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
The KubeSchedulerConfiguration, built from values: leaderElection (Lease in the release namespace),
clientConnection, profiles (with Coscheduling added to each when gangScheduling.enabled, as
manifests/components/coscheduling/configmap-patch.yaml adds it; CapacityScheduling when
capacityScheduling.enabled, as manifests/components/capacityscheduling/configmap-patch.yaml adds it,
its postFilter replaced by [Coscheduling (with gangScheduling), CapacityScheduling] with "*" disabled
as manifests/components/capacityscheduling-coscheduling does), extenders, extraConfig.
*/}}
{{- define "pysched.config" -}}
{{- $le := dict "leaderElect" (.Values.leaderElection.enabled | default false) }}
{{- if .Values.leaderElection.enabled }}
{{- $_ := set $le "leaseDuration" .Values.leaderElection.leaseDuration }}
{{- $_ := set $le "renewDeadline" .Values.leaderElection.renewDeadline }}
{{- $_ := set $le "retryPeriod" .Values.leaderElection.retryPeriod }}
{{- $_ := set $le "resourceLock" "leases" }}
{{- $_ := set $le "resourceName" (include "pysched.leaseName" .) }}
{{- $_ := set $le "resourceNamespace" .Release.Namespace }}
{{- end }}
{{- if not .Values.profiles }}
{{- fail "profiles: at least one profile (schedulerName) is required" }}
{{- end }}
{{- $profiles := list }}
{{- range $i, $p := .Values.profiles }}
{{- if not (kindIs "map" $p) }}
{{- fail (printf "profiles[%d]: must be a map with schedulerName" $i) }}
{{- end }}
{{- if not $p.schedulerName }}
{{- fail (printf "profiles[%d].schedulerName: required" $i) }}
{{- end }}
{{- $p = deepCopy $p }}
{{- if $.Values.gangScheduling.enabled }}
{{- $plugins := dict }}
{{- if $p.plugins }}{{ $plugins = $p.plugins }}{{ end }}
{{- $_ := set $plugins "queueSort" (dict "enabled" (list (dict "name" "Coscheduling")) "disabled" (list (dict "name" "*"))) }}
{{- $mp := dict }}
{{- if $plugins.multiPoint }}{{ $mp = $plugins.multiPoint }}{{ end }}
{{- $_ := set $mp "enabled" (append ($mp.enabled | default (list)) (dict "name" "Coscheduling")) }}
{{- $_ := set $plugins "multiPoint" $mp }}
{{- $_ := set $p "plugins" $plugins }}
{{- end }}
{{- if $.Values.capacityScheduling.enabled }}
{{- $plugins := dict }}
{{- if $p.plugins }}{{ $plugins = $p.plugins }}{{ end }}
{{- $mp := dict }}
{{- if $plugins.multiPoint }}{{ $mp = $plugins.multiPoint }}{{ end }}
{{- $_ := set $mp "enabled" (append ($mp.enabled | default (list)) (dict "name" "CapacityScheduling")) }}
{{- $_ := set $plugins "multiPoint" $mp }}
{{- $postFilter := list (dict "name" "CapacityScheduling") }}
{{- if $.Values.gangScheduling.enabled }}
{{- $postFilter = prepend $postFilter (dict "name" "Coscheduling") }}
{{- end }}
{{- $_ := set $plugins "postFilter" (dict "enabled" $postFilter "disabled" (list (dict "name" "*"))) }}
{{- $_ := set $p "plugins" $plugins }}
{{- end }}
{{- $profiles = append $profiles $p }}
{{- end }}
{{- $cfg := dict "apiVersion" "kubescheduler.config.k8s.io/v1" "kind" "KubeSchedulerConfiguration" "leaderElection" $le "clientConnection" .Values.clientConnection "profiles" $profiles }}
{{- if .Values.extenders }}
{{- $_ := set $cfg "extenders" .Values.extenders }}
{{- end }}
{{- range $k, $v := .Values.extraConfig }}
{{- if has $k (list "apiVersion" "kind" "leaderElection" "clientConnection" "profiles" "extenders") }}
{{- fail (printf "extraConfig.%s: set it with its own value (leaderElection, clientConnection, profiles, extenders), not extraConfig" $k) }}
{{- end }}
{{- $_ := set $cfg $k $v }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}
