package builder

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	fieldpath "k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// reserved is what of a pod is nbkube's own: a template may not name it. The CRDs' schemas
// say the same in CEL (the podTemplate field of KernelSpec, engineTemplate of Cluster); the
// builder's tests check that every volume and mount of a kernel or engine pod is among them.
type reserved struct {
	// volumes are the names of nbkube's volumes.
	volumes []string
	// paths cannot be mount paths of a template.
	paths []string
	// trees cannot hold a template's mount path, at or under them.
	trees []string
}

var (
	kernelReserved = reserved{
		volumes: []string{"agent-bin", "kernel-secret", "home", "tmp", "contents", "ipcluster"},
		paths:   []string{"/", "/tmp", HomeDir},
		trees:   []string{ContentsDir, "/opt/nbkube", "/var/run/nbkube"},
	}
	engineReserved = reserved{
		volumes: []string{"profile", "tmp", "cluster-secret"},
		paths:   []string{"/", "/tmp"},
		trees:   []string{"/ipython", "/var/run/nbkube"},
	}
	// reservedLabels are label keys nbkube sets outside the nbkube.io/ prefix.
	reservedLabels = []string{nbv1.LabelManagedBy, nbv1.LabelComponent}
)

// nbkubeKey says whether a label or annotation key is under nbkube.io/ or a subdomain of it.
func nbkubeKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == "nbkube.io" || strings.HasSuffix(prefix, ".nbkube.io"))
}

// CheckPodTemplate lists what is wrong with a KernelSpec's pod template, in words for its
// author: what would override nbkube's own parts of the pod, what the API server would
// refuse in a pod (label syntax), and a volume of the contents claim, which would give every
// user of the spec every user's home where nbkube mounts each kernel its owner's only.
func CheckPodTemplate(t *nbv1.PodTemplate, contentsClaim string) []string {
	return checkTemplate(t, kernelReserved, contentsClaim, "podTemplate")
}

// CheckEngineTemplate is CheckPodTemplate for a Cluster's engineTemplate.
func CheckEngineTemplate(t *nbv1.PodTemplate, contentsClaim string) []string {
	return checkTemplate(t, engineReserved, contentsClaim, "engineTemplate")
}

func checkTemplate(t *nbv1.PodTemplate, r reserved, contentsClaim, field string) []string {
	if t == nil {
		return nil
	}
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
		if nbkubeKey(k) || slices.Contains(reservedLabels, k) {
			problems = append(problems, fmt.Sprintf("%s.labels: %s is nbkube's own", field, k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Annotations)) {
		if nbkubeKey(k) {
			problems = append(problems, fmt.Sprintf("%s.annotations: %s is nbkube's own", field, k))
		}
	}
	for _, err := range metav1validation.ValidateLabels(t.Labels, fieldpath.NewPath(field, "labels")) {
		problems = append(problems, err.Error())
	}
	for _, err := range metav1validation.ValidateLabels(t.NodeSelector, fieldpath.NewPath(field, "nodeSelector")) {
		problems = append(problems, err.Error())
	}
	volumes := map[string]bool{}
	for _, v := range t.Volumes {
		switch {
		case slices.Contains(r.volumes, v.Name):
			problems = append(problems, fmt.Sprintf("%s.volumes: %s is nbkube's own", field, v.Name))
		case len(validation.IsDNS1123Label(v.Name)) > 0:
			problems = append(problems, fmt.Sprintf("%s.volumes: %q is not a DNS label", field, v.Name))
		case v.PersistentVolumeClaim != nil && contentsClaim != "" && v.PersistentVolumeClaim.ClaimName == contentsClaim:
			problems = append(problems, fmt.Sprintf("%s.volumes: %s mounts the contents claim %s, every user's home; nbkube mounts each kernel its owner's only", field, v.Name, contentsClaim))
		}
		volumes[v.Name] = true
	}
	for _, m := range t.VolumeMounts {
		if !volumes[m.Name] {
			problems = append(problems, fmt.Sprintf("%s.volumeMounts: %s names no volume of %s.volumes", field, m.Name, field))
		}
		if p := r.mountPathProblem(m.MountPath); p != "" {
			problems = append(problems, fmt.Sprintf("%s.volumeMounts: %s %s", field, m.MountPath, p))
		}
	}
	if ptr.Deref(t.AutomountServiceAccountToken, false) && t.ServiceAccountName == "" {
		problems = append(problems, field+".automountServiceAccountToken needs a serviceAccountName: a kernel gets the token of an account its spec names, never one by default")
	}
	return problems
}

// mountPathProblem says why a template may not mount at p, or "".
func (r reserved) mountPathProblem(p string) string {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return "is not an absolute, plain path (no . or .. parts, no trailing /)"
	}
	if slices.Contains(r.paths, p) {
		return "is nbkube's own"
	}
	for _, tree := range r.trees {
		if p == tree || strings.HasPrefix(p, tree+"/") {
			return "is at or under " + tree + ", nbkube's own"
		}
	}
	return ""
}

// applyPodTemplate adds a KernelSpec's pod template to a kernel pod built without it. What
// nbkube set stays: a label or annotation it set keeps its value, its volumes and mounts come
// first. The controller refuses a template CheckPodTemplate finds fault with before a pod is
// built, so nothing here needs to pick between the two.
func applyPodTemplate(pod *corev1.Pod, t *nbv1.PodTemplate) {
	if t == nil {
		return
	}
	t = t.DeepCopy()
	pod.Labels = addMissing(pod.Labels, t.Labels)
	pod.Annotations = addMissing(pod.Annotations, t.Annotations)
	s := &pod.Spec
	s.NodeSelector = t.NodeSelector
	s.Tolerations = t.Tolerations
	s.Affinity = t.Affinity
	s.TopologySpreadConstraints = t.TopologySpreadConstraints
	s.PriorityClassName = t.PriorityClassName
	s.RuntimeClassName = t.RuntimeClassName
	s.ServiceAccountName = t.ServiceAccountName
	if ptr.Deref(t.AutomountServiceAccountToken, false) && t.ServiceAccountName != "" {
		s.AutomountServiceAccountToken = ptr.To(true)
	}
	s.Volumes = append(s.Volumes, t.Volumes...)
	c := &s.Containers[0]
	for _, m := range t.VolumeMounts {
		c.VolumeMounts = append(c.VolumeMounts, m.Mount())
	}
}

// addMissing adds to m the keys of add it lacks.
func addMissing(m, add map[string]string) map[string]string {
	if len(add) == 0 {
		return m
	}
	if m == nil {
		m = make(map[string]string, len(add))
	}
	for k, v := range add {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return m
}
