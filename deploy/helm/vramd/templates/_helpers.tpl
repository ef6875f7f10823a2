{{/* Names ------------------------------------------------------------------ */}}

{{- define "vramd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vramd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "vramd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels: include "vramd.labels" (dict "root" $ "component" "server") */}}
{{- define "vramd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vramd.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "vramd.labels" -}}
helm.sh/chart: {{ include "vramd.chart" .root }}
{{ include "vramd.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: vramd
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "vramd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "vramd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "vramd.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Serving ---------------------------------------------------------------- */}}

{{- define "vramd.port" -}}
{{- if .Values.service.port -}}
{{- .Values.service.port -}}
{{- else if .Values.tls.enabled -}}
8443
{{- else -}}
8080
{{- end -}}
{{- end -}}

{{- define "vramd.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{- define "vramd.portName" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{- define "vramd.listen" -}}
{{- if contains ":" .Values.listenHost -}}
{{- printf "[%s]:%s" .Values.listenHost (include "vramd.port" .) -}}
{{- else -}}
{{- printf "%s:%s" .Values.listenHost (include "vramd.port" .) -}}
{{- end -}}
{{- end -}}

{{- define "vramd.serviceHost" -}}
{{- printf "%s.%s.svc" (include "vramd.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "vramd.urlPrefix" -}}
{{- if .Values.extender.urlPrefix -}}
{{- .Values.extender.urlPrefix -}}
{{- else -}}
{{- printf "%s://%s:%s/scheduler" (include "vramd.scheme" .) (include "vramd.serviceHost" .) (include "vramd.port" .) -}}
{{- end -}}
{{- end -}}

{{- define "vramd.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "vramd.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{- define "vramd.tlsClientSecretName" -}}
{{- default (printf "%s-scheduler-client-tls" (include "vramd.fullname" .)) .Values.tls.clientAuth.existingSecret -}}
{{- end -}}

{{- define "vramd.apiTokenSecretName" -}}
{{- default (printf "%s-api-token" (include "vramd.fullname" .)) .Values.apiToken.existingSecret -}}
{{- end -}}

{{/* Valkey ----------------------------------------------------------------- */}}

{{- define "vramd.valkey.bundled" -}}
{{- if not .Values.valkey.external.url }}true{{ end -}}
{{- end -}}

{{- define "vramd.valkey.fullname" -}}
{{- printf "%s-valkey" (include "vramd.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vramd.valkey.url" -}}
{{- if .Values.valkey.external.url -}}
{{- .Values.valkey.external.url -}}
{{- else -}}
{{- printf "redis://%s.%s.svc:6379" (include "vramd.valkey.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- define "vramd.valkey.secretName" -}}
{{- default (include "vramd.valkey.fullname" .) .Values.valkey.auth.existingSecret -}}
{{- end -}}

{{/* vramd's config file: the values' config block plus the keys the chart owns. */}}
{{- define "vramd.configJson" -}}
{{- $managed := dict "listen" (include "vramd.listen" .) "kube" (dict "enabled" true) -}}
{{- $valkey := dict "url" (include "vramd.valkey.url" .) "key_prefix" .Values.valkey.keyPrefix -}}
{{- if and .Values.valkey.auth.enabled .Values.valkey.auth.username -}}
{{- $_ := set $valkey "username" .Values.valkey.auth.username -}}
{{- end -}}
{{- if and .Values.valkey.auth.enabled (eq .Values.valkey.auth.delivery "file") -}}
{{- $_ := set $valkey "password_file" "/etc/vramd/valkey/password" -}}
{{- end -}}
{{- $_ := set $managed "valkey" $valkey -}}
{{- if .Values.tls.enabled -}}
{{- $tls := dict "cert_file" "/etc/vramd/tls/tls.crt" "key_file" "/etc/vramd/tls/tls.key" -}}
{{- if .Values.tls.clientAuth.enabled -}}
{{- $_ := set $tls "client_ca_file" "/etc/vramd/tls/ca.crt" -}}
{{- end -}}
{{- $_ := set $managed "tls" $tls -}}
{{- end -}}
{{- if .Values.apiToken.enabled -}}
{{- $_ := set $managed "api_token_file" "/etc/vramd/api-token/token" -}}
{{- end -}}
{{- $cfg := mustMergeOverwrite (deepCopy (default (dict) .Values.config)) $managed -}}
{{- toPrettyJson $cfg -}}
{{- end -}}

{{/* Extender entry of a KubeSchedulerConfiguration.
     include "vramd.extenderEntry" (dict "root" $ "urlPrefix" URL "caFile" PATH "certFile" PATH "keyFile" PATH) */}}
{{- define "vramd.extenderEntry" -}}
{{- $v := .root.Values -}}
- urlPrefix: {{ .urlPrefix | quote }}
  filterVerb: filter
  prioritizeVerb: prioritize
  {{- if $v.extender.preempt }}
  preemptVerb: preempt
  {{- end }}
  bindVerb: bind
  weight: {{ $v.extender.weight }}
  nodeCacheCapable: true
  ignorable: {{ $v.extender.ignorable }}
  httpTimeout: {{ $v.extender.httpTimeout | quote }}
  {{- if $v.tls.enabled }}
  enableHTTPS: true
  tlsConfig:
    caFile: {{ .caFile | quote }}
    serverName: {{ default (include "vramd.serviceHost" .root) $v.extender.serverName | quote }}
    {{- if $v.tls.clientAuth.enabled }}
    certFile: {{ .certFile | quote }}
    keyFile: {{ .keyFile | quote }}
    {{- end }}
  {{- else }}
  enableHTTPS: false
  {{- end }}
  managedResources:
  - name: {{ $v.config.resource_name | default "vramd.io/vram" | quote }}
    ignoredByScheduler: true
{{- end -}}

{{/* The full KubeSchedulerConfiguration of the vramd-scheduler Deployment. */}}
{{- define "vramd.schedulerConfig" -}}
{{- $s := .Values.scheduler -}}
apiVersion: {{ $s.configApiVersion }}
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {{ $s.leaderElection }}
  {{- if $s.leaderElection }}
  resourceLock: leases
  resourceName: {{ $s.name }}
  resourceNamespace: {{ .Release.Namespace }}
  {{- end }}
percentageOfNodesToScore: {{ $s.percentageOfNodesToScore }}
profiles:
- schedulerName: {{ $s.name }}
  {{- if $s.disableDefaultPreemption }}
  plugins:
    postFilter:
      disabled:
      - name: DefaultPreemption
  {{- end }}
extenders:
{{ include "vramd.extenderEntry" (dict "root" . "urlPrefix" (include "vramd.urlPrefix" .) "caFile" "/etc/vramd-scheduler/tls/ca.crt" "certFile" "/etc/vramd-scheduler/client-tls/tls.crt" "keyFile" "/etc/vramd-scheduler/client-tls/tls.key") }}
{{- end -}}

{{/* Metric label value kube-state-metrics gives the VRAM resource (vramd.io/vram -> vramd_io_vram). */}}
{{- define "vramd.ksmResource" -}}
{{- regexReplaceAll "[^a-zA-Z0-9_]" (.Values.config.resource_name | default "vramd.io/vram") "_" -}}
{{- end -}}

{{/* Checks that fail the render with a clear message. */}}
{{- define "vramd.validate" -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) (not .Values.tls.certManager.enabled) -}}
{{- fail "tls.enabled needs tls.existingSecret or tls.certManager.enabled" -}}
{{- end -}}
{{- if and .Values.tls.clientAuth.enabled (not .Values.tls.enabled) -}}
{{- fail "tls.clientAuth.enabled needs tls.enabled" -}}
{{- end -}}
{{- if and .Values.tls.clientAuth.enabled .Values.scheduler.enabled (not .Values.tls.clientAuth.existingSecret) (not .Values.tls.certManager.enabled) -}}
{{- fail "tls.clientAuth.enabled with the vramd-scheduler needs tls.clientAuth.existingSecret or tls.certManager.enabled" -}}
{{- end -}}
{{- if not (has .Values.valkey.auth.delivery (list "env" "file")) -}}
{{- fail "valkey.auth.delivery must be env or file" -}}
{{- end -}}
{{- if not (has .Values.scheduler.configApiVersion (list "kubescheduler.config.k8s.io/v1" "kubescheduler.config.k8s.io/v1beta1")) -}}
{{- fail "scheduler.configApiVersion must be kubescheduler.config.k8s.io/v1 or kubescheduler.config.k8s.io/v1beta1" -}}
{{- end -}}
{{- if le (int .Values.extender.weight) 0 -}}
{{- fail "extender.weight must be > 0 (kube-scheduler rejects a prioritize verb with weight 0)" -}}
{{- end -}}
{{- if not (has .Values.podAntiAffinity (list "soft" "hard" "")) -}}
{{- fail "podAntiAffinity must be soft, hard or empty" -}}
{{- end -}}
{{- if and .Values.valkey.auth.username (not .Values.valkey.external.url) -}}
{{- fail "valkey.auth.username is for an external Valkey with ACLs; the bundled Valkey has only the default user" -}}
{{- end -}}
{{- if and .Values.valkey.external.url (regexMatch "^[a-z+]+://[^/@]*@" .Values.valkey.external.url) -}}
{{- fail "valkey.external.url must not carry credentials; use valkey.auth (a Secret)" -}}
{{- end -}}
{{- range $k := list "listen" "tls" "api_token_file" "kube" -}}
{{- if hasKey $.Values.config $k -}}
{{- fail (printf "config.%s is set by the chart; use the chart's values instead" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
