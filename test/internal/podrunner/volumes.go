package podrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// volumes lays out the pod's volumes and returns where each is on the host: a directory of the
// pod for emptyDir and the file volumes (their files written, but for the downward API ones,
// which writeDownward writes), the bound PersistentVolume's hostPath for a claim. Volume types not
// run here are left out (their mounts too).
func (p *PodRun) volumes(ctx context.Context) (map[string]string, error) {
	vols := map[string]string{}
	for _, v := range p.pod.Spec.Volumes {
		dir := filepath.Join(p.dir, "volumes", v.Name)
		var err error
		switch {
		case v.EmptyDir != nil:
			err = os.MkdirAll(dir, 0o777)
		case v.HostPath != nil:
			dir = v.HostPath.Path
		case v.PersistentVolumeClaim != nil:
			dir, err = p.r.claimPath(ctx, p.pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		case v.ConfigMap != nil:
			err = p.r.writeConfigMap(ctx, p.pod.Namespace, dir, v.ConfigMap.LocalObjectReference, v.ConfigMap.Items, v.ConfigMap.Optional)
		case v.Secret != nil:
			err = p.r.writeSecret(ctx, p.pod.Namespace, dir, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
		case v.DownwardAPI != nil:
			err = os.MkdirAll(dir, 0o755)
		case v.Projected != nil:
			err = p.writeProjected(ctx, dir, v.Projected)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s volume %s: %w", p.pod.Namespace, p.pod.Name, v.Name, err)
		}
		vols[v.Name] = dir
	}
	return vols, nil
}

// claimPath is the hostPath of the PersistentVolume claim namespace/name is bound to, made if
// missing (the stack's PersistentVolumes name directories nobody made).
func (r *Runner) claimPath(ctx context.Context, ns, name string) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.opts.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pvc); err != nil {
		return "", fmt.Errorf("reading claim %s: %w", name, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("claim %s is not bound to a PersistentVolume", name)
	}
	pv := &corev1.PersistentVolume{}
	if err := r.opts.Client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return "", fmt.Errorf("reading PersistentVolume %s of claim %s: %w", pvc.Spec.VolumeName, name, err)
	}
	if pv.Spec.HostPath == nil {
		return "", fmt.Errorf("PersistentVolume %s of claim %s is not a hostPath volume, the only kind run here", pv.Name, name)
	}
	path := pv.Spec.HostPath.Path
	if path == "/tmp" || strings.HasPrefix(path, "/tmp/") {
		return "", fmt.Errorf("PersistentVolume %s is at %s, under /tmp, which every container has a private one of: put it elsewhere", pv.Name, path)
	}
	return path, os.MkdirAll(path, 0o777)
}

func (r *Runner) writeConfigMap(ctx context.Context, ns, dir string, ref corev1.LocalObjectReference, items []corev1.KeyToPath, optional *bool) error {
	cm := &corev1.ConfigMap{}
	err := r.opts.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, cm)
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("reading ConfigMap %s: %w", ref.Name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return writeItems(dir, data, items)
}

func (r *Runner) writeSecret(ctx context.Context, ns, dir, name string, items []corev1.KeyToPath, optional *bool) error {
	s := &corev1.Secret{}
	err := r.opts.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("reading Secret %s: %w", name, err)
	}
	return writeItems(dir, s.Data, items)
}

// writeItems writes data's keys into dir, each under its own name or, when items are given,
// only those under their paths.
func writeItems(dir string, data map[string][]byte, items []corev1.KeyToPath) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("no key %s", it.Key)
		}
		if err := writeFile(filepath.Join(dir, it.Path), v); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes b to path through a rename, so a reader never sees half of it.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeProjected writes a projected volume's sources but its downward API ones: a
// ServiceAccount token from the TokenRequest API (bound to the pod, with the projection's
// audience and expiry), ConfigMaps and Secrets. A missing ConfigMap is left out: the apiserver's
// kube-root-ca.crt is published by a controller the stacks here do not run, and a pod that needs
// the CA file fails visibly when it reads it.
func (p *PodRun) writeProjected(ctx context.Context, dir string, v *corev1.ProjectedVolumeSource) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, src := range v.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			tok, err := p.token(ctx, src.ServiceAccountToken)
			if err != nil {
				return err
			}
			if err := writeFile(filepath.Join(dir, src.ServiceAccountToken.Path), []byte(tok)); err != nil {
				return err
			}
		case src.ConfigMap != nil:
			err := p.r.writeConfigMap(ctx, p.pod.Namespace, dir, src.ConfigMap.LocalObjectReference, src.ConfigMap.Items, src.ConfigMap.Optional)
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		case src.Secret != nil:
			if err := p.r.writeSecret(ctx, p.pod.Namespace, dir, src.Secret.Name, src.Secret.Items, src.Secret.Optional); err != nil {
				return err
			}
		}
	}
	return nil
}

// token is a token of the pod's ServiceAccount for the projection, bound to the pod.
func (p *PodRun) token(ctx context.Context, proj *corev1.ServiceAccountTokenProjection) (string, error) {
	saName := p.pod.Spec.ServiceAccountName
	if saName == "" {
		saName = "default"
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.pod.Namespace, Name: saName}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: proj.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.pod.Name, UID: p.pod.UID},
	}}
	if proj.Audience != "" {
		tr.Spec.Audiences = []string{proj.Audience}
	}
	if err := p.r.opts.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token of ServiceAccount %s: %w", saName, err)
	}
	return tr.Status.Token, nil
}

// writeDownward writes the downward API files of the pod's volumes (downwardAPI volumes and the
// downward API sources of projected ones) from pod as it is now.
func writeDownward(pod *corev1.Pod, specVols []corev1.Volume, vols map[string]string) error {
	for _, v := range specVols {
		var items []corev1.DownwardAPIVolumeFile
		switch {
		case v.DownwardAPI != nil:
			items = v.DownwardAPI.Items
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.DownwardAPI != nil {
					items = append(items, src.DownwardAPI.Items...)
				}
			}
		}
		dir, ok := vols[v.Name]
		if !ok {
			continue
		}
		for _, it := range items {
			if it.FieldRef == nil {
				continue // resourceFieldRef: no limits are enforced here
			}
			val, err := fieldValue(pod, it.FieldRef.FieldPath)
			if err != nil {
				return fmt.Errorf("pod %s/%s volume %s: %w", pod.Namespace, pod.Name, v.Name, err)
			}
			if err := writeFile(filepath.Join(dir, it.Path), []byte(val)); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
