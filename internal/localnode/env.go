package localnode

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// hostIP is the node's address as pods see it: the pod IPs are other addresses on the same lo.
const hostIP = "127.0.0.1"

// podObjects holds the Secrets and ConfigMaps of a pod's namespace that its env and volumes refer
// to, fetched from the API just before use; a name that is absent was not found.
type podObjects struct {
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
}

// findObject looks up a Secret or ConfigMap of objs by name. A missing one is an error unless
// the reference to it is optional; then found is false and the reference adds nothing, as with
// the kubelet.
func findObject[T any](objs map[string]*T, kind, name string, optional bool) (obj *T, found bool, err error) {
	if obj, ok := objs[name]; ok {
		return obj, true, nil
	}
	if optional {
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("%s %q not found", kind, name)
}

// envData is the data of the Secret or ConfigMap (kind) of that name as the environment sees it:
// text by key, without a ConfigMap's binaryData. A missing object is findObject's.
func (o podObjects) envData(kind, name string, optional *bool) (data map[string]string, found bool, err error) {
	if kind == "Secret" {
		s, found, err := findObject(o.secrets, "secret", name, isOptional(optional))
		if !found {
			return nil, false, err
		}
		data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, true, nil
	}
	cm, found, err := findObject(o.configMaps, "configmap", name, isOptional(optional))
	if !found {
		return nil, false, err
	}
	return cm.Data, true, nil
}

// hostEnv is the part of the nbkube process's own environment that containers inherit: PATH so
// that commands resolve as they do for nbkube, HOME because many tools need one. Nothing else of
// the host's environment (credentials, kubeconfig, tokens) reaches a pod.
type hostEnv struct {
	path, home string
	// forkServer is the socket of the node's kernel fork server, empty when it has none; a
	// container sees it as agentapi.EnvForkServer.
	forkServer string
	// proxy is the URL of the HTTP proxy that is a container's only way out of the pod
	// network, empty when it has its host's network.
	proxy string
}

// envContext is what resolving a container's environment takes besides the container itself.
type envContext struct {
	pod   *corev1.Pod
	podIP string
	// allocatable stands in for unset limits in resourceFieldRef, as the kubelet does.
	allocatable corev1.ResourceList
	objects     podObjects
	host        hostEnv
}

// envList is an environment in definition order where a later definition of a name replaces the
// earlier value in place.
type envList struct {
	names  []string
	values map[string]string
}

func (e *envList) set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

func (e *envList) lookup(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

func (e *envList) vars() []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, corev1.EnvVar{Name: n, Value: e.values[n]})
	}
	return out
}

// containerEnv resolves the variables a container declares the way the kubelet does: envFrom
// sources first (prefixed keys), then env entries in order, where a literal value has its $(VAR)
// references to earlier variables expanded and a valueFrom is resolved without expansion.
func containerEnv(c *corev1.Container, ec envContext) ([]corev1.EnvVar, error) {
	var defined envList
	for _, from := range c.EnvFrom {
		var (
			data map[string]string
			err  error
		)
		switch {
		case from.ConfigMapRef != nil:
			data, _, err = ec.objects.envData("ConfigMap", from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
		case from.SecretRef != nil:
			data, _, err = ec.objects.envData("Secret", from.SecretRef.Name, from.SecretRef.Optional)
		}
		if err != nil {
			return nil, err
		}
		for _, k := range sortedKeys(data) {
			defined.set(from.Prefix+k, data[k])
		}
	}

	for _, ev := range c.Env {
		if ev.Value != "" || ev.ValueFrom == nil {
			defined.set(ev.Name, expand(ev.Value, defined.lookup))
			continue
		}
		from := ev.ValueFrom
		var val string
		switch {
		case from.FieldRef != nil:
			v, err := podFieldValue(ec.pod, from.FieldRef.FieldPath, ec.podIP)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", ev.Name, err)
			}
			val = v
		case from.ResourceFieldRef != nil:
			v, err := resourceFieldValue(from.ResourceFieldRef, ec.pod, c.Name, ec.allocatable)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", ev.Name, err)
			}
			val = v
		case from.ConfigMapKeyRef != nil, from.SecretKeyRef != nil:
			v, found, err := keyRefValue(from, ec.objects, ec.pod.Namespace)
			if err != nil {
				return nil, err
			}
			if !found {
				continue
			}
			val = v
		default:
			return nil, fmt.Errorf("env %s: this kind of valueFrom is not supported by the local node", ev.Name)
		}
		defined.set(ev.Name, val)
	}
	return defined.vars(), nil
}

// keyRefValue resolves a configMapKeyRef or secretKeyRef. A missing object or key is an error
// unless the reference is optional; then found is false and the variable is left out.
func keyRefValue(from *corev1.EnvVarSource, objs podObjects, namespace string) (value string, found bool, err error) {
	var (
		kind, name, key string
		optional        *bool
	)
	if ref := from.ConfigMapKeyRef; ref != nil {
		kind, name, key, optional = "ConfigMap", ref.Name, ref.Key, ref.Optional
	} else {
		ref := from.SecretKeyRef
		kind, name, key, optional = "Secret", ref.Name, ref.Key, ref.Optional
	}
	data, found, err := objs.envData(kind, name, optional)
	if !found {
		return "", false, err
	}
	if v, ok := data[key]; ok {
		return v, true, nil
	}
	if isOptional(optional) {
		return "", false, nil
	}
	return "", false, fmt.Errorf("couldn't find key %s in %s %s/%s", key, kind, namespace, name)
}

// processEnv is the environment a container's process gets: the host's PATH and HOME and a
// HOSTNAME of the pod's name (which a container runtime would set), overridden by what the
// container declares.
func processEnv(declared []corev1.EnvVar, host hostEnv, podName string) []string {
	var env envList
	env.set("PATH", host.path)
	if host.home != "" {
		env.set("HOME", host.home)
	}
	env.set("HOSTNAME", podName)
	if host.forkServer != "" {
		env.set(agentapi.EnvForkServer, host.forkServer)
	}
	if host.proxy != "" {
		for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env.set(name, host.proxy)
		}
		env.set("NO_PROXY", egressNoProxy)
		env.set("no_proxy", egressNoProxy)
	}
	for _, v := range declared {
		env.set(v.Name, v.Value)
	}
	out := make([]string, 0, len(env.names))
	for _, n := range env.names {
		out = append(out, n+"="+env.values[n])
	}
	return out
}

// envReferences lists the Secrets and ConfigMaps a container's env and envFrom read.
func envReferences(c *corev1.Container) (secrets, configMaps []string) {
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			configMaps = append(configMaps, from.ConfigMapRef.Name)
		}
		if from.SecretRef != nil {
			secrets = append(secrets, from.SecretRef.Name)
		}
	}
	for _, ev := range c.Env {
		if ev.Value != "" || ev.ValueFrom == nil {
			continue
		}
		if ref := ev.ValueFrom.ConfigMapKeyRef; ref != nil {
			configMaps = append(configMaps, ref.Name)
		}
		if ref := ev.ValueFrom.SecretKeyRef; ref != nil {
			secrets = append(secrets, ref.Name)
		}
	}
	return secrets, configMaps
}

// envLookup turns a container's declared variables into the lookup that $(VAR) expansion of
// command, args and subPathExpr uses; like the kubelet's, it does not see PATH, HOME or HOSTNAME.
func envLookup(env []corev1.EnvVar) func(string) (string, bool) {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// podFieldValue resolves a downward API fieldPath of the pod, for env and for volumes.
func podFieldValue(pod *corev1.Pod, fieldPath, podIP string) (string, error) {
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	}
	if key, ok := subscript(fieldPath, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(fieldPath, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", fieldPath)
}

// subscript parses field['key'] (the downward API's only subscript form).
func subscript(fieldPath, field string) (string, bool) {
	rest, ok := strings.CutPrefix(fieldPath, field+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// formatMap renders labels or annotations as the downward API does: sorted key="value" lines.
func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// resourceFieldValue resolves a downward API resourceFieldRef. Unset limits read as the node's
// allocatable, as on a kubelet; the values are reported only, never enforced.
func resourceFieldValue(ref *corev1.ResourceFieldSelector, pod *corev1.Pod, defaultContainer string, allocatable corev1.ResourceList) (string, error) {
	name := ref.ContainerName
	if name == "" {
		name = defaultContainer
	}
	var c *corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		if i := slices.IndexFunc(list, func(c corev1.Container) bool { return c.Name == name }); i >= 0 {
			c = &list[i]
			break
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container named %q", name)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, res, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	q, ok := list[corev1.ResourceName(res)]
	if !ok || q.IsZero() {
		if kind == "limits" {
			q = allocatable[corev1.ResourceName(res)]
		}
	}
	if corev1.ResourceName(res) == corev1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

func isOptional(b *bool) bool { return b != nil && *b }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
