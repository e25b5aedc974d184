{{/* Names: "<release>" when the release is called freshet (or contains it), else "<release>-freshet". */}}
{{- define "freshet.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "freshet.sparkConnectName" -}}
{{- printf "%s-spark-connect" (include "freshet.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "freshet.claimName" -}}
{{- .Values.persistence.existingClaim | default (printf "%s-data" (include "freshet.fullname" .)) -}}
{{- end -}}

{{- define "freshet.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* app.kubernetes.io/name is "freshet" whatever the release: the ServiceMonitor's jobLabel, so
     the scrape job is "freshet", the name ops/prometheus/rules.yml selects. */}}
{{- define "freshet.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "freshet.labels" -}}
{{ include "freshet.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: freshet
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "freshet.sparkConnectSelectorLabels" -}}
app.kubernetes.io/name: spark-connect
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "freshet.sparkConnectLabels" -}}
{{ include "freshet.sparkConnectSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: freshet
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The warehouse config as the daemon reads it: values.config plus `listen` (the Service port)
     and, with a Spark Connect server, `spark: {remote, conf}` instead of the local Spark. */}}
{{- define "freshet.config" -}}
{{- if hasKey .Values.config "listen" -}}
{{- fail "config.listen is set by the chart (0.0.0.0:<service.port>): remove it from the values and set service.port" -}}
{{- end -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%v" .Values.service.port) -}}
{{- if .Values.sparkConnect.enabled -}}
{{- $remote := printf "sc://%s:%v" (include "freshet.sparkConnectName" .) .Values.sparkConnect.port -}}
{{- $_ := set $cfg "spark" (dict "remote" $remote "conf" (deepCopy .Values.sparkConnect.sessionConf)) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{- define "freshet.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "freshet.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* With more than one replica the pods stand by for each other (values.yaml `replicas`). */}}
{{- define "freshet.standby" -}}
{{- if gt (int .Values.replicas) 1 -}}
{{- if not (hasPrefix "s3a://" (toString .Values.config.warehouse.root)) -}}
{{- fail "replicas > 1 needs config.warehouse.root in a bucket (s3a://…): the lease that keeps one writer per warehouse lives there" -}}
{{- end -}}
{{- if not .Values.persistence.enabled -}}
{{- fail "replicas > 1 needs persistence.enabled: the landing zone both pods read lives on the data volume" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{- define "freshet.serviceAccountName" -}}
{{- if or .Values.serviceAccount.create (include "freshet.standby" .) -}}
{{- .Values.serviceAccount.name | default (include "freshet.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
