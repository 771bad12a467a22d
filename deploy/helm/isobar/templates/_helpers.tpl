{{/* The release's name prefixes every object: <release>-<component>. */}}
{{- define "isobar.fullname" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "isobar.region" -}}
{{- required "region is required: the region's name" .Values.region -}}
{{- end -}}

{{/* Labels of an object of a component: (dict "ctx" $ "component" "bookie"). */}}
{{- define "isobar.labels" -}}
{{ include "isobar.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
isobar.io/region: {{ include "isobar.region" .ctx }}
{{- end -}}

{{- define "isobar.selectorLabels" -}}
app.kubernetes.io/name: isobar
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "isobar.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{/* The region metadata store's client URLs, one per member. */}}
{{- define "isobar.metastoreEndpoints" -}}
{{- $fn := include "isobar.fullname" . -}}
{{- $scheme := include "isobar.scheme" . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.metastore.replicas) -}}
{{- $out = append $out (printf "%s://%s-metastore-%d.%s-metastore:2379" $scheme $fn $i $fn) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* The global store's client URLs: globalStore.endpoints, or this release's own members. */}}
{{- define "isobar.globalEndpoints" -}}
{{- if .Values.globalStore.endpoints -}}
{{- join "," .Values.globalStore.endpoints -}}
{{- else if .Values.globalStore.enabled -}}
{{- $fn := include "isobar.fullname" . -}}
{{- $scheme := include "isobar.scheme" . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.globalStore.replicas) -}}
{{- $out = append $out (printf "%s://%s-global-%d.%s-global:2379" $scheme $fn $i $fn) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
{{- end -}}

{{/* Seconds the kubelet waits for a pod: the preStop pause, the drain and a margin. */}}
{{- define "isobar.grace" -}}
{{- add .Values.preStopSeconds .Values.drainTimeoutSeconds .Values.graceMarginSeconds -}}
{{- end -}}

{{/* The tokens Secret's name. */}}
{{- define "isobar.tokensSecret" -}}
{{- .Values.auth.existingSecret | default (printf "%s-tokens" (include "isobar.fullname" .)) -}}
{{- end -}}

{{/*
The pod-level settings every role shares: (dict "ctx" $ "component" "bookie").
*/}}
{{- define "isobar.podSpec" -}}
{{- $v := .ctx.Values -}}
terminationGracePeriodSeconds: {{ include "isobar.grace" .ctx }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
enableServiceLinks: false
{{- with $v.imagePullSecrets }}
imagePullSecrets: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity: {{ toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The container fields every role shares: (dict "ctx" $ "role" "bookie" "port" 8000 "resources" .Values.bookie.resources).
The role's command, probes on /healthz and /readyz of its HTTP port, and
the preStop pause before the SIGTERM that starts its drain.
*/}}
{{- define "isobar.container" -}}
{{- $v := .ctx.Values -}}
name: {{ .role }}
image: {{ printf "%s:%s" $v.image.repository $v.image.tag | quote }}
imagePullPolicy: {{ $v.image.pullPolicy }}
args: {{ list .role "--config" (printf "/etc/isobar/%s" (.config | default "region.yaml")) | toJson }}
startupProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 2
lifecycle:
  preStop:
    sleep: {seconds: {{ $v.preStopSeconds }}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
{{- with .resources }}
resources: {{ toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Environment every pod gets: its name and IP. */}}
{{- define "isobar.podEnv" -}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
{{- end -}}

{{/*
Mounts and volumes for the config file and the secrets a role uses:
(dict "ctx" $ "kind" "broker" "federation" true "public" false "tokens" true).
/secrets/tls: the kind's certificate from the region CA (tls.crt,
tls.key, ca.crt); /secrets/federation and /secrets/public: from the
federation CA; /secrets/tokens: the tokens Secret.
*/}}
{{- define "isobar.mounts" -}}
- {name: config, mountPath: /etc/isobar, readOnly: true}
{{- if .ctx.Values.tls.enabled }}
- {name: tls, mountPath: /secrets/tls, readOnly: true}
{{- if .federation }}
- {name: federation-tls, mountPath: /secrets/federation, readOnly: true}
{{- end }}
{{- if .public }}
- {name: public-tls, mountPath: /secrets/public, readOnly: true}
{{- end }}
{{- end }}
{{- if and .tokens .ctx.Values.auth.enabled }}
- {name: tokens, mountPath: /secrets/tokens, readOnly: true}
{{- end }}
{{- end -}}

{{- define "isobar.volumes" -}}
{{- $fn := include "isobar.fullname" .ctx -}}
- name: config
  configMap: {name: {{ $fn }}-config}
{{- if .ctx.Values.tls.enabled }}
- name: tls
  secret: {secretName: {{ $fn }}-{{ .kind }}-tls, defaultMode: 0440}
{{- if .federation }}
- name: federation-tls
  secret: {secretName: {{ $fn }}-federation-tls, defaultMode: 0440}
{{- end }}
{{- if .public }}
- name: public-tls
  secret: {secretName: {{ $fn }}-public-tls, defaultMode: 0440}
{{- end }}
{{- end }}
{{- if and .tokens .ctx.Values.auth.enabled }}
- name: tokens
  secret: {secretName: {{ include "isobar.tokensSecret" .ctx }}, defaultMode: 0440}
{{- end }}
{{- end -}}

{{/* A PodDisruptionBudget of one component: at most one pod down. */}}
{{- define "isobar.pdb" -}}
{{- if .ctx.Values.podDisruptionBudgets.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "isobar.fullname" .ctx }}-{{ .component }}
  labels: {{ include "isobar.labels" . | nindent 4 }}
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {{ include "isobar.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}
