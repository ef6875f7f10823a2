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

{{/* The node agents' ServiceAccount (identities: the only one that reports usage). */}}
{{- define "vramd.agentServiceAccountName" -}}
{{- printf "%s-agent" (include "vramd.fullname" .) | trunc 63 | trimSuffix "-" -}}
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

{{/* The API listener (config api_listen): probes, /metrics, /v1; never /scheduler, never a client certificate. */}}
{{- define "vramd.apiPort" -}}
{{- .Values.service.apiPort -}}
{{- end -}}

{{- define "vramd.apiListen" -}}
{{- if contains ":" .Values.listenHost -}}
{{- printf "[%s]:%v" .Values.listenHost (include "vramd.apiPort" .) -}}
{{- else -}}
{{- printf "%s:%v" .Values.listenHost (include "vramd.apiPort" .) -}}
{{- end -}}
{{- end -}}

{{/* The admission webhook's own listener (config admission.listen): /admission/* only. */}}
{{- define "vramd.admissionListen" -}}
{{- if contains ":" .Values.listenHost -}}
{{- printf "[%s]:%v" .Values.listenHost .Values.admission.port -}}
{{- else -}}
{{- printf "%s:%v" .Values.listenHost .Values.admission.port -}}
{{- end -}}
{{- end -}}

{{/* Namespaces whose pods never go through the webhook: kube-system, the release's, admission.excludeNamespaces. */}}
{{- define "vramd.admissionExcluded" -}}
{{- concat (list "kube-system" .Release.Namespace) .Values.admission.excludeNamespaces | uniq | toJson -}}
{{- end -}}

{{/* Where the webhooks' caBundle comes from: "certManager" (its CA injector) or the name of
     the TLS Secret whose ca.crt the post-install hook copies (ensure-secrets' or tls.existingSecret). */}}
{{- define "vramd.admissionCaSource" -}}
{{- if eq (include "vramd.tlsSource" .) "certManager" }}certManager{{ else }}{{ include "vramd.tlsSecretName" . }}{{ end -}}
{{- end -}}

{{/* One webhook of the configurations (admission-webhooks.yaml):
     include "vramd.admissionWebhook" (dict "root" $ "name" N "path" P "rules" R ["namespaceSelector" S] ["failurePolicy" F] ["reinvocationPolicy" P]) */}}
{{- define "vramd.admissionWebhook" -}}
{{- $a := .root.Values.admission -}}
- name: {{ .name }}
  admissionReviewVersions: ["v1", "v1beta1"]
  sideEffects: None
  failurePolicy: {{ default $a.failurePolicy .failurePolicy }}
  timeoutSeconds: {{ $a.timeoutSeconds }}
  matchPolicy: Equivalent
  {{- with .reinvocationPolicy }}
  reinvocationPolicy: {{ . }}
  {{- end }}
  clientConfig:
    service:
      namespace: {{ .root.Release.Namespace }}
      name: {{ include "vramd.fullname" .root }}
      path: {{ .path }}
      port: {{ $a.port }}
  rules:
    {{- toYaml .rules | nindent 4 }}
  {{- with .namespaceSelector }}
  namespaceSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
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

{{/* The DNS names of vramd's serving certificate (ensure-secrets and cert-manager alike):
     the Service's names, the extender's serverName, and localhost for vramctl through
     `kubectl exec` or `kubectl port-forward`. One per line. */}}
{{- define "vramd.tlsDnsNames" -}}
{{- $full := include "vramd.fullname" . -}}
{{- $names := list $full (printf "%s.%s" $full .Release.Namespace) (printf "%s.%s.svc" $full .Release.Namespace) (printf "%s.%s.svc.cluster.local" $full .Release.Namespace) "localhost" -}}
{{- with .Values.extender.serverName -}}
{{- $names = append $names . -}}
{{- end -}}
{{- $names | uniq | join "\n" -}}
{{- end -}}

{{/* Where the certificates come from: "generated" (ensure-secrets), "certManager" or "existing". */}}
{{- define "vramd.tlsSource" -}}
{{- if .Values.tls.certManager.enabled }}certManager{{ else if .Values.tls.existingSecret }}existing{{ else }}generated{{ end -}}
{{- end -}}

{{/* The client certificate vramd-scheduler presents (mutual TLS): "SECRET KEY_CRT KEY_KEY".
     tls.clientAuth.existingSecret or cert-manager's Certificate: a kubernetes.io/tls Secret;
     otherwise client.crt/client.key of the TLS Secret (the layout ensure-secrets writes). */}}
{{- define "vramd.tlsClientSecretName" -}}
{{- if .Values.tls.clientAuth.existingSecret -}}
{{- .Values.tls.clientAuth.existingSecret -}}
{{- else if .Values.tls.certManager.enabled -}}
{{- printf "%s-scheduler-client-tls" (include "vramd.fullname" .) -}}
{{- else -}}
{{- include "vramd.tlsSecretName" . -}}
{{- end -}}
{{- end -}}

{{/* Where vramd-scheduler finds client.crt/client.key: beside ca.crt when they come from the
     TLS Secret itself, else from their own Secret's volume. */}}
{{- define "vramd.scheduler.clientDir" -}}
{{- if eq (include "vramd.tlsClientSecretName" .) (include "vramd.tlsSecretName" .) }}/etc/vramd-scheduler/tls{{ else }}/etc/vramd-scheduler/client-tls{{ end -}}
{{- end -}}

{{- define "vramd.tlsClientKeys" -}}
{{- if or .Values.tls.clientAuth.existingSecret .Values.tls.certManager.enabled }}tls.crt tls.key{{ else }}client.crt client.key{{ end -}}
{{- end -}}

{{- define "vramd.apiTokenSecretName" -}}
{{- default (printf "%s-api-token" (include "vramd.fullname" .)) .Values.apiToken.existingSecret -}}
{{- end -}}

{{- define "vramd.apiTokenKey" -}}
{{- if .Values.apiToken.existingSecret }}{{ .Values.apiToken.existingSecretKey }}{{ else }}token{{ end -}}
{{- end -}}

{{/* The Secrets the Job `vramd ensure-secrets` creates when absent (GitOps-safe:
     nothing is generated at render time, nothing is read back with `lookup`):
     a dict of flag -> Secret name, empty when every Secret is given or cert-manager's. */}}
{{- define "vramd.ensureSecrets" -}}
{{- $s := dict -}}
{{- if and .Values.tls.enabled (eq (include "vramd.tlsSource" .) "generated") -}}
{{- $_ := set $s "tls-secret" (include "vramd.tlsSecretName" .) -}}
{{- end -}}
{{- if and .Values.apiToken.enabled (not .Values.apiToken.existingSecret) -}}
{{- $_ := set $s "token-secret" (include "vramd.apiTokenSecretName" .) -}}
{{- end -}}
{{- if and .Values.valkey.auth.enabled (not .Values.valkey.auth.existingSecret) (include "vramd.valkey.bundled" .) -}}
{{- $_ := set $s "valkey-secret" (include "vramd.valkey.secretName" .) -}}
{{- end -}}
{{- toJson $s -}}
{{- end -}}

{{/* Kubernetes versions ------------------------------------------------------ */}}

{{/* The cluster's version as X.Y.Z, vendor suffixes dropped (v1.27.3+k3s1, v1.27.3-eks-1 -> 1.27.3). */}}
{{- define "vramd.clusterVersion" -}}
{{- regexFind "^[0-9]+\\.[0-9]+\\.[0-9]+" (trimPrefix "v" .Capabilities.KubeVersion.Version) -}}
{{- end -}}

{{- define "vramd.scheduler.imageTag" -}}
{{- default (printf "v%s" (include "vramd.clusterVersion" .)) .Values.scheduler.image.tag -}}
{{- end -}}

{{/* The version of the kube-scheduler that runs: its image tag when that is vX.Y.Z[...], else the cluster's. */}}
{{- define "vramd.schedulerVersion" -}}
{{- $tag := regexFind "^[0-9]+\\.[0-9]+\\.[0-9]+" (trimPrefix "v" (include "vramd.scheduler.imageTag" .)) -}}
{{- default (include "vramd.clusterVersion" .) $tag -}}
{{- end -}}

{{/* The KubeSchedulerConfiguration API a kube-scheduler of version .version (X.Y.Z) reads
     best: include "vramd.configApiFor" (dict "version" "1.22.0"). */}}
{{- define "vramd.configApiFor" -}}
{{- if semverCompare "<1.22.0" .version -}}
kubescheduler.config.k8s.io/v1beta1
{{- else if semverCompare "<1.23.0" .version -}}
kubescheduler.config.k8s.io/v1beta2
{{- else if semverCompare "<1.25.0" .version -}}
kubescheduler.config.k8s.io/v1beta3
{{- else -}}
kubescheduler.config.k8s.io/v1
{{- end -}}
{{- end -}}

{{- define "vramd.scheduler.configApiVersion" -}}
{{- default (include "vramd.configApiFor" (dict "version" (include "vramd.schedulerVersion" .))) .Values.scheduler.configApiVersion -}}
{{- end -}}

{{/* kube-scheduler 1.20-1.21 can crash in DefaultPreemption when an extender rejects a pod
     on several nodes (kubernetes#101548): off there unless set. Returns "true" or "". */}}
{{- define "vramd.scheduler.disablePreemption" -}}
{{- if kindIs "invalid" .Values.scheduler.disableDefaultPreemption -}}
{{- if semverCompare "<1.22.0" (include "vramd.schedulerVersion" .) }}true{{ end -}}
{{- else if .Values.scheduler.disableDefaultPreemption -}}
true
{{- end -}}
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

{{/* The ACL user vramd logs in as: valkey.auth.username; for the bundled Valkey
     with auth, "vramd" when that is empty (its `default` user is off); "" otherwise. */}}
{{- define "vramd.valkey.username" -}}
{{- if .Values.valkey.auth.enabled -}}
{{- if .Values.valkey.auth.username -}}
{{- .Values.valkey.auth.username -}}
{{- else if include "vramd.valkey.bundled" . -}}
vramd
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "vramd.valkey.passwordKey" -}}
{{- if .Values.valkey.auth.existingSecret }}{{ .Values.valkey.auth.existingSecretPasswordKey }}{{ else }}password{{ end -}}
{{- end -}}

{{/* vramd's config file: the values' config block plus the keys the chart owns. */}}
{{- define "vramd.configJson" -}}
{{- $managed := dict "listen" (include "vramd.listen" .) "api_listen" (include "vramd.apiListen" .) "kube" (dict "enabled" true) -}}
{{- $valkey := dict "url" (include "vramd.valkey.url" .) "key_prefix" .Values.valkey.keyPrefix -}}
{{- with include "vramd.valkey.username" . -}}
{{- $_ := set $valkey "username" . -}}
{{- end -}}
{{- if and .Values.valkey.auth.enabled (eq .Values.valkey.auth.delivery "file") -}}
{{- $_ := set $valkey "password_file" "/etc/vramd/valkey/password" -}}
{{- end -}}
{{- $_ := set $managed "valkey" $valkey -}}
{{- if .Values.tls.enabled -}}
{{- $tls := dict "cert_file" "/etc/vramd/tls/tls.crt" "key_file" "/etc/vramd/tls/tls.key" -}}
{{- if .Values.tls.clientAuth.enabled -}}
{{- $_ := set $tls "client_ca_file" "/etc/vramd/tls/ca.crt" -}}
{{- $_ := set $tls "client_names" (include "vramd.tls.clientNames" . | fromJsonArray) -}}
{{- end -}}
{{- $_ := set $managed "tls" $tls -}}
{{- end -}}
{{- if .Values.apiToken.enabled -}}
{{- $_ := set $managed "api_token_file" "/etc/vramd/api-token/token" -}}
{{- end -}}
{{- if .Values.identities.enabled -}}
{{- $_ := set $managed "auth" (dict "identities" true "audience" .Values.identities.audience "agent_service_account" (printf "%s/%s" .Release.Namespace (include "vramd.agentServiceAccountName" .))) -}}
{{- end -}}
{{- if .Values.admission.enabled -}}
{{- /* scheduler_name: wiring (a), the chart's scheduler, sets it on VRAM pods left to the
       default; wiring (b), an existing scheduler that carries the extender: empty. */ -}}
{{- $adm := dict "enabled" true "listen" (include "vramd.admissionListen" .) "vramd_users" (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "vramd.serviceAccountName" .)) "scheduler_name" (ternary .Values.scheduler.name "" .Values.scheduler.enabled) -}}
{{- with .Values.admission.runtimeClass -}}
{{- $_ := set $adm "runtime_class" . -}}
{{- end -}}
{{- $_ := set $managed "admission" $adm -}}
{{- end -}}
{{- $modes := list -}}
{{- range .Values.enforce.nodeModes -}}
{{- $modes = append $modes (printf "%s:%s" .label .mode) -}}
{{- end -}}
{{- $_ := set $managed "enforce" (dict "mode" .Values.enforce.mode "node_modes" $modes) -}}
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
apiVersion: {{ include "vramd.scheduler.configApiVersion" . }}
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
  {{- if include "vramd.scheduler.disablePreemption" . }}
  plugins:
    postFilter:
      disabled:
      - name: DefaultPreemption
  {{- end }}
extenders:
{{- $client := include "vramd.scheduler.clientDir" . }}
{{ include "vramd.extenderEntry" (dict "root" . "urlPrefix" (include "vramd.urlPrefix" .) "caFile" "/etc/vramd-scheduler/tls/ca.crt" "certFile" (printf "%s/client.crt" $client) "keyFile" (printf "%s/client.key" $client)) }}
{{- end -}}

{{/* Metric label value kube-state-metrics gives the VRAM resource (vramd.io/vram -> vramd_io_vram). */}}
{{- define "vramd.ksmResource" -}}
{{- regexReplaceAll "[^a-zA-Z0-9_]" (.Values.config.resource_name | default "vramd.io/vram") "_" -}}
{{- end -}}

{{/* Checks that fail the render with a clear message. */}}
{{- /* The names a client certificate must hold on the extender port (issue
       33): tls.clientAuth.allowedNames, else the certificate the chart has
       issued: cert-manager's (CN scheduler.name) or ensure-secrets' (CN
       vramd-scheduler). A JSON array. */ -}}
{{- define "vramd.tls.clientNames" -}}
{{- if .Values.tls.clientAuth.allowedNames -}}
{{- toJson .Values.tls.clientAuth.allowedNames -}}
{{- else if .Values.tls.clientAuth.existingSecret -}}
{{- fail "tls.clientAuth.existingSecret needs tls.clientAuth.allowedNames: the names (CN or DNS subjectAltName) its certificate holds; vramd accepts no other client certificate" -}}
{{- else if .Values.tls.certManager.enabled -}}
{{- toJson (list .Values.scheduler.name) -}}
{{- else -}}
{{- toJson (list "vramd-scheduler") -}}
{{- end -}}
{{- end -}}

{{- define "vramd.validate" -}}
{{- /* Issue 33: no open door without an explicit acknowledgement. */ -}}
{{- $npOff := not .Values.networkPolicy.enabled -}}
{{- $apiOpen := or $npOff (empty .Values.networkPolicy.apiFrom) -}}
{{- range .Values.networkPolicy.apiFrom -}}
{{- if and (hasKey . "namespaceSelector") (empty .namespaceSelector) (not (hasKey . "podSelector")) -}}
{{- $apiOpen = true -}}
{{- end -}}
{{- end -}}
{{- if and (not .Values.apiToken.enabled) (not .Values.identities.enabled) $apiOpen (not .Values.insecure.acknowledge) -}}
{{- fail "apiToken.enabled=false and identities.enabled=false while the API port admits every pod (networkPolicy disabled, or networkPolicy.apiFrom empty or admitting every namespace): anyone on the pod network could rewrite any node's usage and any GPU lock. Restrict networkPolicy.apiFrom, or set insecure.acknowledge=true" -}}
{{- end -}}
{{- if and (or (not .Values.tls.enabled) (not .Values.tls.clientAuth.enabled)) $npOff (not .Values.insecure.acknowledge) -}}
{{- fail "tls.enabled=false or tls.clientAuth.enabled=false with networkPolicy.enabled=false: any pod could call the extender's bind verb. Enable the NetworkPolicy, or set insecure.acknowledge=true" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled .Values.tls.existingSecret -}}
{{- fail "tls.certManager.enabled and tls.existingSecret exclude each other: cert-manager writes the TLS Secret" -}}
{{- end -}}
{{- if not (has .Values.valkey.auth.delivery (list "env" "file")) -}}
{{- fail "valkey.auth.delivery must be env or file" -}}
{{- end -}}
{{- $apis := list "kubescheduler.config.k8s.io/v1beta1" "kubescheduler.config.k8s.io/v1beta2" "kubescheduler.config.k8s.io/v1beta3" "kubescheduler.config.k8s.io/v1" -}}
{{- if and .Values.scheduler.configApiVersion (not (has .Values.scheduler.configApiVersion $apis)) -}}
{{- fail (printf "scheduler.configApiVersion must be empty (chosen from the version) or one of %s" (join ", " $apis)) -}}
{{- end -}}
{{- if not (include "vramd.clusterVersion" .) -}}
{{- fail (printf "cannot read a version X.Y.Z from the cluster's version %q" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- if .Values.scheduler.enabled -}}
{{- /* Which kube-scheduler versions serve each config API (kubernetes/kubernetes
       pkg/scheduler/apis/config/scheme: v1beta1 1.19-1.22, v1beta2 1.22-1.27,
       v1beta3 1.23-1.28, v1 from 1.25). */ -}}
{{- $served := dict "kubescheduler.config.k8s.io/v1beta1" ">=1.19.0 <1.23.0" "kubescheduler.config.k8s.io/v1beta2" ">=1.22.0 <1.28.0" "kubescheduler.config.k8s.io/v1beta3" ">=1.23.0 <1.29.0" "kubescheduler.config.k8s.io/v1" ">=1.25.0" -}}
{{- $api := include "vramd.scheduler.configApiVersion" . -}}
{{- $ver := include "vramd.schedulerVersion" . -}}
{{- if not (semverCompare (get $served $api) $ver) -}}
{{- fail (printf "scheduler.configApiVersion %s is not served by kube-scheduler %s (it is by %s); leave it empty to choose from the version" $api $ver (get $served $api)) -}}
{{- end -}}
{{- end -}}
{{- if .Values.admission.enabled -}}
{{- if not .Values.tls.enabled -}}
{{- fail "admission.enabled needs tls.enabled: the API server calls webhooks over HTTPS only (set admission.enabled=false to run without the webhook)" -}}
{{- end -}}
{{- if has (int .Values.admission.port) (list (int .Values.service.apiPort) (int (include "vramd.port" .))) -}}
{{- fail "admission.port must differ from the extender port (service.port) and service.apiPort" -}}
{{- end -}}
{{- end -}}
{{- if eq (int .Values.service.apiPort) (int (include "vramd.port" .)) -}}
{{- fail "service.apiPort must differ from the extender port (service.port)" -}}
{{- end -}}
{{- if le (int .Values.extender.weight) 0 -}}
{{- fail "extender.weight must be > 0 (kube-scheduler rejects a prioritize verb with weight 0)" -}}
{{- end -}}
{{- if not (has .Values.podAntiAffinity (list "soft" "hard" "")) -}}
{{- fail "podAntiAffinity must be soft, hard or empty" -}}
{{- end -}}
{{- if and .Values.valkey.auth.enabled (not .Values.valkey.auth.existingSecret) (not (include "vramd.valkey.bundled" .)) -}}
{{- fail "valkey.external.url with valkey.auth.enabled needs valkey.auth.existingSecret (the password of that Valkey)" -}}
{{- end -}}
{{- if and .Values.valkey.auth.username (not (regexMatch "^[A-Za-z0-9_.-]+$" .Values.valkey.auth.username)) -}}
{{- fail "valkey.auth.username: letters, digits, '_', '.' and '-' only" -}}
{{- end -}}
{{- if and .Values.valkey.auth.username (not .Values.valkey.auth.enabled) -}}
{{- fail "valkey.auth.username needs valkey.auth.enabled (a user logs in with a password)" -}}
{{- end -}}
{{- if eq .Values.valkey.auth.username "default" | and (include "vramd.valkey.bundled" .) -}}
{{- fail "valkey.auth.username: the bundled Valkey turns its `default` user off; choose another name (empty: vramd)" -}}
{{- end -}}
{{- /* Issue 33 item 5: the agent shares the host's PID namespace; a process of
       vramd's, the scheduler's or Valkey's uid or group could read their
       /proc/PID/environ and /proc/PID/root (Secrets). The amd preset runs as
       root with CAP_SYS_PTRACE by design (values.yaml). */ -}}
{{- if and .Values.agent.enabled (ne .Values.agent.preset "amd") -}}
{{- $a := .Values.agent.podSecurityContext -}}
{{- if not (and $a.runAsUser $a.runAsGroup) -}}
{{- fail "agent.podSecurityContext needs runAsUser and runAsGroup of the agent's own (not the image's 65532, vramd's uid): the agent runs with hostPID" -}}
{{- end -}}
{{- $others := dict "podSecurityContext (vramd)" .Values.podSecurityContext -}}
{{- if .Values.scheduler.enabled -}}{{- $_ := set $others "scheduler.podSecurityContext" .Values.scheduler.podSecurityContext -}}{{- end -}}
{{- if include "vramd.valkey.bundled" . -}}{{- $_ := set $others "valkey.podSecurityContext" .Values.valkey.podSecurityContext -}}{{- end -}}
{{- $agentGroups := list (toString $a.runAsGroup) -}}
{{- with $a.fsGroup }}{{ $agentGroups = append $agentGroups (toString .) }}{{ end -}}
{{- range $a.supplementalGroups }}{{ $agentGroups = append $agentGroups (toString .) }}{{ end -}}
{{- range $who, $o := $others -}}
{{- $uid := toString (default 65532 $o.runAsUser) -}}
{{- if eq (toString $a.runAsUser) $uid -}}
{{- fail (printf "agent.podSecurityContext.runAsUser %s is also %s's uid: the agent runs with hostPID and could read that pod's /proc/PID/environ and /proc/PID/root; give the agent a uid of its own" $uid $who) -}}
{{- end -}}
{{- range $g := list $o.runAsGroup $o.fsGroup -}}
{{- if and $g (has (toString $g) $agentGroups) -}}
{{- fail (printf "the agent's groups (agent.podSecurityContext runAsGroup/fsGroup/supplementalGroups) include %v, a group of %s: give the agent groups of its own" $g $who) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.valkey.external.url (regexMatch "^[a-z+]+://[^/@]*@" .Values.valkey.external.url) -}}
{{- fail "valkey.external.url must not carry credentials; use valkey.auth (a Secret)" -}}
{{- end -}}
{{- range $k := list "listen" "api_listen" "tls" "api_token_file" "kube" "admission" -}}
{{- if hasKey $.Values.config $k -}}
{{- fail (printf "config.%s is set by the chart; use the chart's values instead" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
