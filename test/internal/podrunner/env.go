package podrunner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// containerEnv is c's env as the kubelet makes it: envFrom first, then env, downward API,
// ConfigMap and Secret references resolved and $(VAR) references to earlier variables expanded.
// It returns the env as NAME=value and as a map for expanding command and args.
func (r *Runner) containerEnv(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]string, map[string]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		data, err := r.envSource(ctx, pod.Namespace, from)
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s/%s container %s envFrom: %w", pod.Namespace, pod.Name, c.Name, err)
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		v := expand(e.Value, vars)
		if f := e.ValueFrom; f != nil {
			var err error
			switch {
			case f.FieldRef != nil:
				v, err = fieldValue(pod, f.FieldRef.FieldPath)
			case f.ConfigMapKeyRef != nil:
				cm := &corev1.ConfigMap{}
				err = r.opts.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: f.ConfigMapKeyRef.Name}, cm)
				v = cm.Data[f.ConfigMapKeyRef.Key]
				if apierrors.IsNotFound(err) && f.ConfigMapKeyRef.Optional != nil && *f.ConfigMapKeyRef.Optional {
					continue
				}
			case f.SecretKeyRef != nil:
				s := &corev1.Secret{}
				err = r.opts.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: f.SecretKeyRef.Name}, s)
				v = string(s.Data[f.SecretKeyRef.Key])
				if apierrors.IsNotFound(err) && f.SecretKeyRef.Optional != nil && *f.SecretKeyRef.Optional {
					continue
				}
			case f.ResourceFieldRef != nil:
				v = "1" // no limits are enforced here; a process reading its CPU count gets one
			default:
				err = errors.New("unsupported valueFrom")
			}
			if err != nil {
				return nil, nil, fmt.Errorf("pod %s/%s container %s env %s: %w", pod.Namespace, pod.Name, c.Name, e.Name, err)
			}
		}
		set(e.Name, v)
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, vars, nil
}

// envSource is the data of an envFrom's ConfigMap or Secret (none when optional and missing).
func (r *Runner) envSource(ctx context.Context, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm := &corev1.ConfigMap{}
		err := r.opts.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: from.ConfigMapRef.Name}, cm)
		if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
			return nil, nil
		}
		return cm.Data, err
	case from.SecretRef != nil:
		s := &corev1.Secret{}
		err := r.opts.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: from.SecretRef.Name}, s)
		if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
			return nil, nil
		}
		data := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, err
	}
	return nil, errors.New("neither configMapRef nor secretRef")
}

// expand replaces $(NAME) with the value of NAME when it is defined and $$ with $, as the kubelet
// does in env values, command and args; anything else is left as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteByte(s[i])
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// fieldValue resolves a downward API field path.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "status.podIP", "status.hostIP":
		return "127.0.0.1", nil
	case "metadata.labels", "metadata.annotations":
		m := pod.Labels
		if path == "metadata.annotations" {
			m = pod.Annotations
		}
		var lines []string
		for k, v := range m {
			lines = append(lines, fmt.Sprintf("%s=%q", k, v))
		}
		return strings.Join(sortedStrings(lines), "\n"), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if k, ok := strings.CutPrefix(path, prefix+"['"); ok {
			return m[strings.TrimSuffix(k, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported field path %q", path)
}
