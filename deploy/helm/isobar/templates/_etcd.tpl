{{/*
An etcd member set (`isobar metastore`): a headless Service that
publishes members before they are ready (peers must find each other to
form a quorum, and readiness needs a leader), a StatefulSet whose pods
start in parallel for the same reason, and a PodDisruptionBudget.
(dict "ctx" $ "component" "metastore" "values" .Values.metastore "config" "region.yaml" "kind" "metastore")
*/}}
{{- define "isobar.etcd" -}}
{{- $fn := include "isobar.fullname" .ctx -}}
{{- $name := printf "%s-%s" $fn .component -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  labels: {{ include "isobar.labels" . | nindent 4 }}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {{ include "isobar.selectorLabels" . | nindent 4 }}
  ports:
    - {name: client, port: 2379, targetPort: client}
    - {name: peer, port: 2380, targetPort: peer}
    - {name: http, port: 8000, targetPort: http}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ $name }}
  labels: {{ include "isobar.labels" . | nindent 4 }}
spec:
  serviceName: {{ $name }}
  replicas: {{ .values.replicas }}
  podManagementPolicy: Parallel
  selector:
    matchLabels: {{ include "isobar.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels: {{ include "isobar.labels" . | nindent 8 }}
      annotations:
        checksum/config: {{ include (print .ctx.Template.BasePath "/configmap.yaml") .ctx | sha256sum }}
    spec:
      {{- include "isobar.podSpec" . | nindent 6 }}
      containers:
        - {{- include "isobar.container" (dict "ctx" .ctx "role" "metastore" "config" .config "resources" .values.resources) | nindent 10 }}
          env:
            {{- include "isobar.podEnv" . | nindent 12 }}
            - {name: ISOBAR_ETCD_NAME, value: $(POD_NAME)}
            - {name: ISOBAR_ETCD_ADVERTISECLIENTADDR, value: $(POD_NAME).{{ $name }}:2379}
            - {name: ISOBAR_ETCD_ADVERTISEPEERADDR, value: $(POD_NAME).{{ $name }}:2380}
          ports:
            - {name: client, containerPort: 2379}
            - {name: peer, containerPort: 2380}
            - {name: http, containerPort: 8000}
          volumeMounts:
            {{- include "isobar.mounts" (dict "ctx" .ctx) | nindent 12 }}
            - {name: data, mountPath: /data}
      volumes:
        {{- include "isobar.volumes" (dict "ctx" .ctx "kind" .kind) | nindent 8 }}
  volumeClaimTemplates:
    - metadata:
        name: data
      spec:
        accessModes: [ReadWriteOnce]
        {{- with .values.storage.storageClassName }}
        storageClassName: {{ . }}
        {{- end }}
        resources:
          requests: {storage: {{ .values.storage.size }}}
{{ include "isobar.pdb" . }}
{{- end -}}
