package step

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const podOK = `framework: torch
trainer: {}
pod:
  nodeSelector: {gpu-type: a100}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]
  schedulingGates: [example.com/quota]
  serviceAccountName: trainer
  imagePullSecrets: [regcred]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: datasets, readOnly: true}}
  - {name: creds, secret: {secretName: s3}}
  - {name: cfg, configMap: {name: train-config}}
  - {name: scratch, emptyDir: {sizeLimit: 10Gi}}
  volumeMounts:
  - {name: data, mountPath: /data, readOnly: true}
  - {name: scratch, mountPath: /scratch}
  env:
    HF_TOKEN: {secretKeyRef: {name: hf, key: token}}
    MODE: {configMapKeyRef: {name: train-config, key: mode}}
  envFrom:
  - {secretRef: {name: s3-credentials}, prefix: AWS_}
  - {configMapRef: {name: train-config, optional: true}}
`

func TestPodBlockParsesAndValidates(t *testing.T) {
	s, err := Parse([]byte(podOK))
	require.NoError(t, err)
	require.Empty(t, s.Validate())
	assert.Equal(t, "datasets", s.Pod.CoreVolumes()[0].PersistentVolumeClaim.ClaimName)
	assert.Equal(t, "10Gi", s.Pod.CoreVolumes()[3].EmptyDir.SizeLimit.String())
	vols, mounts := s.Pod.CoreVolumes(), s.Pod.CoreVolumeMounts()
	require.Len(t, vols, 6, "one volume per envFrom source")
	assert.Equal(t, "trainstep-env-from-0", vols[4].Name)
	assert.Equal(t, "s3-credentials", vols[4].Secret.SecretName)
	assert.True(t, *vols[5].ConfigMap.Optional)
	assert.Equal(t, "/var/run/trainstep/env-from/1", mounts[3].MountPath)
	assert.True(t, mounts[3].ReadOnly)
	assert.Equal(t, []string{"AWS_", ""}, s.Pod.EnvFromPrefixes())
	env := s.Pod.CoreEnv()
	require.Len(t, env, 2)
	assert.Equal(t, "HF_TOKEN", env[0].Name, "sorted by name")
	assert.Equal(t, "token", env[0].ValueFrom.SecretKeyRef.Key)
	assert.Equal(t, "hf", env[0].ValueFrom.SecretKeyRef.Name)
}

func TestPodBlockUnknownKeysAreNamed(t *testing.T) {
	_, err := Parse([]byte("framework: torch\ntrainer: {}\npod: {nodeSelecter: {a: b}}"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `pod.nodeSelecter`)
	assert.Contains(t, err.Error(), `did you mean "nodeSelector"`)
	_, err = Parse([]byte("framework: torch\ntrainer: {}\npod: {volumes: [{name: x, csi: {drivr: d}}]}"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `pod.volumes[0].csi.drivr`, "a source's own keys are checked too")
	assert.Contains(t, err.Error(), `did you mean "driver"`)
	_, err = Parse([]byte("framework: torch\ntrainer: {}\npod: {tolerations: [{key: a, operater: Exists}]}"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `pod.tolerations[0].operater`)
}

func TestPodBlockBadValues(t *testing.T) {
	base := "framework: torch\ntrainer: {}\npod:\n  "
	cases := map[string]struct{ yaml, field string }{
		"node selector value":    {"nodeSelector: {gpu: 'a b'}", "pod.nodeSelector[gpu]"},
		"toleration operator":    {"tolerations: [{key: a, operator: Maybe}]", "pod.tolerations[0].operator"},
		"toleration effect":      {"tolerations: [{key: a, operator: Exists, effect: Never}]", "pod.tolerations[0].effect"},
		"exists with value":      {"tolerations: [{key: a, operator: Exists, value: b}]", "pod.tolerations[0].value"},
		"affinity operator":      {"affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: z, operator: Is, values: [a]}]}]}}}", "pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator"},
		"affinity weight":        {"affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 0, preference: {}}]}}", "pod.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"},
		"priority class":         {"priorityClassName: high", "pod.priorityClassName"},
		"grace period":           {"terminationGracePeriodSeconds: -1", "pod.terminationGracePeriodSeconds"},
		"gate":                   {"schedulingGates: ['bad gate']", "pod.schedulingGates[0]"},
		"service account":        {"serviceAccountName: Trainer_SA", "pod.serviceAccountName"},
		"pull secret duplicate":  {"imagePullSecrets: [a, a]", "pod.imagePullSecrets[1]"},
		"volume without source":  {"volumes: [{name: data}]", "pod.volumes[0]"},
		"volume two sources":     {"volumes: [{name: data, emptyDir: {}, secret: {secretName: s}}]", "pod.volumes[0]"},
		"volume name":            {"volumes: [{name: Data, emptyDir: {}}]", "pod.volumes[0].name"},
		"claim name":             {"volumes: [{name: data, persistentVolumeClaim: {}}]", "pod.volumes[0].persistentVolumeClaim.claimName"},
		"duplicate volume":       {"volumes: [{name: d, emptyDir: {}}, {name: d, emptyDir: {}}]", "pod.volumes[1].name"},
		"empty dir medium":       {"volumes: [{name: d, emptyDir: {medium: Disk}}]", "pod.volumes[0].emptyDir.medium"},
		"host path":              {"volumes: [{name: d, hostPath: {path: /data}}]", "pod.volumes[0].hostPath"},
		"csi without driver":     {"volumes: [{name: d, csi: {}}]", "pod.volumes[0].csi.driver"},
		"nfs without server":     {"volumes: [{name: d, nfs: {path: /x}}]", "pod.volumes[0].nfs.server"},
		"nfs relative path":      {"volumes: [{name: d, nfs: {server: nfs.local, path: x}}]", "pod.volumes[0].nfs.path"},
		"ephemeral, no template": {"volumes: [{name: d, ephemeral: {}}]", "pod.volumes[0].ephemeral.volumeClaimTemplate"},
		"image without ref":      {"volumes: [{name: d, image: {pullPolicy: Always}}]", "pod.volumes[0].image.reference"},
		"mount of no volume":     {"volumeMounts: [{name: data, mountPath: /data}]", "pod.volumeMounts[0].name"},
		"relative mount":         {"volumes: [{name: d, emptyDir: {}}]\n  volumeMounts: [{name: d, mountPath: data}]", "pod.volumeMounts[0].mountPath"},
		"duplicate mount path":   {"volumes: [{name: d, emptyDir: {}}]\n  volumeMounts: [{name: d, mountPath: /a}, {name: d, mountPath: /a/}]", "pod.volumeMounts[1].mountPath"},
		"escaping sub path":      {"volumes: [{name: d, emptyDir: {}}]\n  volumeMounts: [{name: d, mountPath: /a, subPath: ../x}]", "pod.volumeMounts[0].subPath"},
		"env name":               {"env: {1X: {secretKeyRef: {name: s, key: k}}}", "pod.env[1X]"},
		"env without a source":   {"env: {X: {}}", "pod.env[X]"},
		"env secret without key": {"env: {X: {secretKeyRef: {name: s}}}", "pod.env[X].secretKeyRef.key"},
		"envFrom without source": {"envFrom: [{prefix: A_}]", "pod.envFrom[0]"},
		"envFrom two sources":    {"envFrom: [{secretRef: {name: s}, configMapRef: {name: c}}]", "pod.envFrom[0]"},
		"envFrom prefix":         {"envFrom: [{prefix: 1A, secretRef: {name: s}}]", "pod.envFrom[0].prefix"},
		"envFrom secret name":    {"envFrom: [{secretRef: {name: S_1}}]", "pod.envFrom[0].secretRef.name"},
		"reserved volume name":   {"volumes: [{name: trainstep-x, emptyDir: {}}]", "pod.volumes[0].name"},
		"reserved mount path":    {"volumes: [{name: d, emptyDir: {}}]\n  volumeMounts: [{name: d, mountPath: /var/run/trainstep/x}]", "pod.volumeMounts[0].mountPath"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse([]byte(base + tc.yaml))
			require.NoError(t, err)
			errs := s.Validate()
			require.NotEmpty(t, errs)
			assert.Equal(t, tc.field, errs[0].Field, errs.ToAggregate().Error())
		})
	}
}

// Every source Kubernetes takes for a pod reaches it as written; hostPath alone is refused.
func TestPodVolumeSources(t *testing.T) {
	cases := map[string]string{
		"csi":         "csi: {driver: secrets-store.csi.k8s.io, readOnly: true, volumeAttributes: {secretProviderClass: vault}}",
		"nfs":         "nfs: {server: nfs.example.com, path: /exports/datasets, readOnly: true}",
		"ephemeral":   "ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], storageClassName: fast, resources: {requests: {storage: 100Gi}}}}}",
		"projected":   "projected: {sources: [{secret: {name: s3}}, {serviceAccountToken: {audience: vault, path: token}}]}",
		"downwardAPI": "downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}",
		"image":       "image: {reference: ghcr.io/org/llama:v1, pullPolicy: IfNotPresent}",
		"emptyDir":    "emptyDir: {medium: HugePages-2Mi}",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse([]byte("framework: torch\ntrainer: {}\npod:\n  volumes: [{name: v, " + src + "}]\n  volumeMounts: [{name: v, mountPath: /v}]\n"))
			require.NoError(t, err)
			require.Empty(t, s.Validate())
			vols := s.Pod.CoreVolumes()
			require.Len(t, vols, 1)
			assert.Equal(t, []string{name}, volumeSources(vols[0].VolumeSource), "the source reaches the pod")
		})
	}
	t.Run("hostPath is refused by name, with why and what instead", func(t *testing.T) {
		s, err := Parse([]byte("framework: torch\ntrainer: {}\npod: {volumes: [{name: x, hostPath: {path: /}}]}"))
		require.NoError(t, err)
		errs := s.Validate()
		require.Len(t, errs, 1)
		assert.Equal(t, "pod.volumes[0].hostPath", errs[0].Field)
		assert.Contains(t, errs[0].Error(), "must not mount the node's own filesystem")
		assert.Contains(t, errs[0].Error(), "persistentVolumeClaim")
	})
	t.Run("two sources are named", func(t *testing.T) {
		s, err := Parse([]byte("framework: torch\ntrainer: {}\npod: {volumes: [{name: x, nfs: {server: a, path: /b}, csi: {driver: d}}]}"))
		require.NoError(t, err)
		assert.Contains(t, s.Validate().ToAggregate().Error(), "must have exactly one volume source (has nfs, csi)")
	})
}
