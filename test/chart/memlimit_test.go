package chart_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestChart_ProcessesKnowTheirMemoryLimit: the manager and the API server get their own
// container's memory limit (NBKUBE_MEMORY_LIMIT, from the downward API), from which nbkube
// sets the Go runtime's soft limit below it.
func TestChart_ProcessesKnowTheirMemoryLimit(t *testing.T) {
	seen := 0
	for _, o := range render(t, "nb") {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtimeFromUnstructured(o, &d); err != nil {
			t.Fatal(err)
		}
		c := d.Spec.Template.Spec.Containers[0]
		found := false
		for _, e := range c.Env {
			if e.Name != "NBKUBE_MEMORY_LIMIT" {
				continue
			}
			found = true
			if f := e.ValueFrom; f == nil || f.ResourceFieldRef == nil || f.ResourceFieldRef.Resource != "limits.memory" || f.ResourceFieldRef.ContainerName != c.Name {
				t.Errorf("%s: NBKUBE_MEMORY_LIMIT is %+v, want its own container's limits.memory", d.Name, e.ValueFrom)
			}
		}
		if !found {
			t.Errorf("%s: no NBKUBE_MEMORY_LIMIT", d.Name)
		}
		seen++
	}
	if seen != 2 {
		t.Errorf("%d Deployments, want the manager's and the API server's", seen)
	}
}
