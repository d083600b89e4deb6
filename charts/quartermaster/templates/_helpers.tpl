{{/* Name of the chart, or nameOverride. */}}
{{- define "quartermaster.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name of the release's objects: the release name when it already holds the
chart name, else "<release>-<chart>"; fullnameOverride wins. */}}
{{- define "quartermaster.fullname" -}}
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

{{/* Labels every object carries. */}}
{{- define "quartermaster.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "quartermaster.selectorLabels" . }}
app.kubernetes.io/version: {{ include "quartermaster.version" . | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: quartermaster
{{- end }}

{{/* Labels that select the controller's pods (never change them in an upgrade). */}}
{{- define "quartermaster.selectorLabels" -}}
app.kubernetes.io/name: {{ include "quartermaster.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The controller version: image.tag, else the chart's appVersion. */}}
{{- define "quartermaster.version" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* The image reference: repository:tag, or repository@digest when a digest is given. */}}
{{- define "quartermaster.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "quartermaster.version" .) }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the controller runs as. */}}
{{- define "quartermaster.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "quartermaster.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The affinity: .Values.affinity, with the pods' own labelSelector filled into every pod
(anti-)affinity term that has none (so the default anti-affinity spreads this release's
replicas without repeating its labels in values.yaml). */}}
{{- define "quartermaster.affinity" -}}
{{- $affinity := deepCopy (default (dict) .Values.affinity) }}
{{- $selector := dict "matchLabels" (include "quartermaster.selectorLabels" . | fromYaml) }}
{{- range $kind := list "podAffinity" "podAntiAffinity" }}
{{- with get $affinity $kind }}
{{- range (default (list) .requiredDuringSchedulingIgnoredDuringExecution) }}
{{- if not .labelSelector }}
{{- $_ := set . "labelSelector" $selector }}
{{- end }}
{{- end }}
{{- range (default (list) .preferredDuringSchedulingIgnoredDuringExecution) }}
{{- if and .podAffinityTerm (not .podAffinityTerm.labelSelector) }}
{{- $_ := set .podAffinityTerm "labelSelector" $selector }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if $affinity }}
{{- toYaml $affinity }}
{{- end }}
{{- end }}

{{/* topologySpreadConstraints with the pods' own labelSelector filled in where missing. */}}
{{- define "quartermaster.topologySpreadConstraints" -}}
{{- $constraints := list }}
{{- $selector := dict "matchLabels" (include "quartermaster.selectorLabels" . | fromYaml) }}
{{- range .Values.topologySpreadConstraints }}
{{- $constraint := deepCopy . }}
{{- if not $constraint.labelSelector }}
{{- $_ := set $constraint "labelSelector" $selector }}
{{- end }}
{{- $constraints = append $constraints $constraint }}
{{- end }}
{{- if $constraints }}
{{- toYaml $constraints }}
{{- end }}
{{- end }}

{{/* The controller's cloud settings as environment variables (EnvVar list items), one per
non-empty value under settings: the variables the controller reads for the same flags. */}}
{{- define "quartermaster.cloudEnv" -}}
{{- $s := .Values.settings }}
{{- $gcp := default dict $s.gcp }}
{{- $azure := default dict $s.azure }}
{{- $vars := list
  (list "CLUSTER_REGION" $s.region)
  (list "CLUSTER_ENDPOINT" $s.clusterEndpoint)
  (list "CLUSTER_CA_BUNDLE" $s.clusterCABundle)
  (list "CLUSTER_CIDR" $s.clusterCIDR)
  (list "INTERRUPTION_QUEUE" $s.interruptionQueue)
  (list "PRICE_REFRESH_INTERVAL" $s.priceRefreshInterval)
  (list "GCP_PROJECT" $gcp.project)
  (list "GCP_ENDPOINT" $gcp.endpoint)
  (list "AZURE_SUBSCRIPTION_ID" $azure.subscriptionId)
  (list "AZURE_RESOURCE_GROUP" $azure.resourceGroup)
  (list "AZURE_ENDPOINT" $azure.endpoint) }}
{{- range $vars }}
{{- if index . 1 }}
- name: {{ index . 0 }}
  value: {{ index . 1 | quote }}
{{- end }}
{{- end }}
{{- end }}
