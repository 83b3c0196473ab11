{{/* Object names: "<release>-coxswain", or the release name when it already says coxswain. */}}
{{- define "coxswain.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "coxswain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "coxswain.controller.name" -}}{{ include "coxswain.fullname" . }}-controller{{- end -}}
{{- define "coxswain.proxy.name" -}}{{ include "coxswain.fullname" . }}-proxy{{- end -}}
{{- define "coxswain.discovery.name" -}}{{ include "coxswain.fullname" . }}-discovery{{- end -}}
{{- define "coxswain.caSecret.name" -}}{{ include "coxswain.fullname" . }}-discovery-ca{{- end -}}
{{- define "coxswain.trustBundle.name" -}}{{ include "coxswain.fullname" . }}-discovery-trust-bundle{{- end -}}

{{/* Labels every object carries. */}}
{{- define "coxswain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "coxswain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of a component: name, instance, component. */}}
{{- define "coxswain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "coxswain.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The shared pool's labels as the controller's --shared-proxy-selector. */}}
{{- define "coxswain.proxy.selector" -}}
app.kubernetes.io/name={{ include "coxswain.name" . }},app.kubernetes.io/instance={{ .Release.Name }},app.kubernetes.io/component=proxy
{{- end -}}

{{- define "coxswain.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* Default topology spread for a component: zones, then nodes, both best effort. */}}
{{- define "coxswain.topologySpread" -}}
{{- if .values.topologySpreadConstraints -}}
{{ toYaml .values.topologySpreadConstraints }}
{{- else -}}
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "coxswain.selectorLabels" (dict "root" .root "component" .component) | nindent 6 }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "coxswain.selectorLabels" (dict "root" .root "component" .component) | nindent 6 }}
{{- end -}}
{{- end -}}

{{/* Pod and container security contexts: the restricted Pod Security Standard. */}}
{{- define "coxswain.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "coxswain.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
