{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "ear.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: every object of the release is named from it. */}}
{{- define "ear.fullname" -}}
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

{{- define "ear.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* EAR's pods (the in-chart Redis has its own component, so neither selector takes the other's pods). */}}
{{- define "ear.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ear.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: router
{{- end }}

{{- define "ear.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "ear.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: session-store
{{- end }}

{{- define "ear.commonLabels" -}}
helm.sh/chart: {{ include "ear.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ear
{{- end }}

{{- define "ear.labels" -}}
{{ include "ear.commonLabels" . }}
{{ include "ear.selectorLabels" . }}
{{- end }}

{{- define "ear.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ear.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Service an InferencePool's endpointPickerRef names (epp mode). */}}
{{- define "ear.eppServiceName" -}}
{{- printf "%s-epp" (include "ear.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ear.inferencePoolName" -}}
{{- if .Values.inferencePool.name }}
{{- .Values.inferencePool.name }}
{{- else if .Values.inferencePool.create }}
{{- include "ear.fullname" . }}
{{- end }}
{{- end }}

{{- define "ear.leaseName" -}}
{{- default (printf "%s-leader" (include "ear.fullname" .)) .Values.ha.leaseName | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ear.redisName" -}}
{{- printf "%s-redis" (include "ear.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* redis:// URL of the shared session store, or "" for none. */}}
{{- define "ear.sessionStore" -}}
{{- if .Values.redis.deploy.enabled }}
{{- printf "redis://%s:6379" (include "ear.redisName" .) }}
{{- else if .Values.redis.url }}
{{- .Values.redis.url }}
{{- end }}
{{- end }}

{{/* modelServers.matchLabels as a label selector string (k=v,k=v), keys sorted. */}}
{{- define "ear.labelSelector" -}}
{{- $parts := list }}
{{- range $k, $v := .Values.modelServers.matchLabels }}
{{- $parts = append $parts (printf "%s=%s" $k $v) }}
{{- end }}
{{- join "," $parts }}
{{- end }}

{{/*
EAR's YAML config: the chart's fields (policy, scheduler, discovery, ha, session store), then .Values.config merged
over them.
*/}}
{{- define "ear.config" -}}
{{- $discovery := dict "kind" "k8s" "labelSelector" (include "ear.labelSelector" .) "port" ((first .Values.targetPorts).number | int) "roleLabel" .Values.discovery.roleLabel "modelLabel" .Values.discovery.modelLabel "kvEventsLabel" .Values.discovery.kvEventsLabel "kvEventsPort" (.Values.discovery.kvEventsPort | int) "kvReplayPort" (.Values.discovery.kvReplayPort | int) }}
{{- $pool := include "ear.inferencePoolName" . }}
{{- if $pool }}
{{- $_ := set $discovery "inferencePool" $pool }}
{{- end }}
{{- $ha := dict "mode" .Values.ha.mode "leaseName" (include "ear.leaseName" .) "leaseDurationSeconds" (.Values.ha.leaseDurationSeconds | int) }}
{{- $cfg := dict "policy" .Values.policy "scheduler" .Values.scheduler "discovery" $discovery "ha" $ha }}
{{- if .Values.policyConfig }}
{{- $_ := set $cfg "policyConfig" .Values.policyConfig }}
{{- end }}
{{- if eq .Values.mode "standalone" }}
{{- $_ := set $cfg "httpThreads" .Values.httpThreads }}
{{- end }}
{{- $store := include "ear.sessionStore" . }}
{{- if $store }}
{{- $_ := set $cfg "sessionStore" $store }}
{{- end }}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy .Values.config)) }}
{{- end }}
