{{/* Rules across values that values.schema.json cannot state: a bad combination fails the render. */}}
{{- define "ear.validate" -}}
{{- if and .Values.inferencePool.create (ne .Values.mode "epp") }}
{{- fail "inferencePool.create needs mode: epp (the pool's endpointPickerRef names EAR's endpoint picker service)" }}
{{- end }}
{{- if and .Values.redis.url .Values.redis.deploy.enabled }}
{{- fail "redis: set either redis.url (an external Redis) or redis.deploy.enabled, not both" }}
{{- end }}
{{- if ne (len (uniq (list (int .Values.ports.grpc) (int .Values.ports.grpcHealth) (int .Values.ports.metrics)))) 3 }}
{{- fail "ports.grpc, ports.grpcHealth and ports.metrics must differ" }}
{{- end }}
{{- $seen := dict }}
{{- range .Values.targetPorts }}
{{- if hasKey $seen (toString .number) }}
{{- fail (printf "targetPorts: port %v is listed twice (an InferencePool's port numbers must be unique)" .number) }}
{{- end }}
{{- $_ := set $seen (toString .number) true }}
{{- end }}
{{- if hasKey .Values.config "discovery" }}
{{- fail "config.discovery: set modelServers, targetPorts, inferencePool and discovery.* instead (the chart writes EAR's discovery section)" }}
{{- end }}
{{- end }}
