{{/* The release's base name, cut to fit the 63 characters of a DNS label with suffixes. */}}
{{- define "nbkube.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 48 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 48 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "nbkube.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "manager"). */}}
{{- define "nbkube.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "nbkube.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "nbkube.kernelImage" -}}
{{- printf "%s:%s" .Values.kernelImage.repository .Values.kernelImage.tag -}}
{{- end -}}

{{- define "nbkube.authSecret" -}}
{{- .Values.auth.existingSecret | default (printf "%s-auth" (include "nbkube.fullname" .)) -}}
{{- end -}}

{{- define "nbkube.usersSecret" -}}
{{- .Values.auth.users.existingSecret | default (printf "%s-users" (include "nbkube.fullname" .)) -}}
{{- end -}}

{{- define "nbkube.contentsClaim" -}}
{{- .Values.contents.existingClaim | default (printf "%s-contents" (include "nbkube.fullname" .)) -}}
{{- end -}}

{{/* Pod-level settings both Deployments share. */}}
{{- define "nbkube.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
  runAsUser: {{ .Values.runAsUser }}
  runAsGroup: {{ .Values.runAsGroup }}
  fsGroup: {{ .Values.runAsGroup }}
{{- end -}}

{{/* Flags both processes share. */}}
{{- define "nbkube.commonArgs" -}}
- --log-format={{ .Values.logFormat }}
- --health-probe-bind-address=:8081
{{- if .Values.metrics.enabled }}
- --metrics-bind-address=:8443
{{- else }}
- --metrics-bind-address=0
{{- end }}
{{- end -}}

{{- define "nbkube.podNamespaceEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{/* The container's memory limit (bytes), from which nbkube sets the Go runtime's soft limit
(GOMEMLIMIT) to a share of it. Call with (dict "container" NAME). */}}
{{- define "nbkube.memoryLimitEnv" -}}
- name: NBKUBE_MEMORY_LIMIT
  valueFrom:
    resourceFieldRef:
      containerName: {{ .container }}
      resource: limits.memory
{{- end -}}

{{- define "nbkube.ports" -}}
- name: probes
  containerPort: 8081
{{- if .Values.metrics.enabled }}
- name: metrics
  containerPort: 8443
{{- end }}
{{- end -}}
