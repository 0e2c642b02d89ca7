package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A node mounts image volumes when its kubelet has ImageVolume always on (1.36+) and its
// runtime is containerd 2.1+ or CRI-O 1.31+, as the versions it reports say; anything else,
// or nothing reported, does not.
func TestMountsImageVolumes(t *testing.T) {
	for _, c := range []struct {
		kubelet, runtime string
		want             bool
	}{
		{"v1.36.3", "containerd://2.4.2", true},
		{"v1.36.0", "containerd://2.1.0", true},
		{"v1.37.1-gke.1200", "containerd://2.2.0-1", true},
		{"v1.36.3", "cri-o://1.36.1", true},
		{"v1.36.3", "cri-o://1.31.0", true},
		{"v1.35.6", "containerd://2.4.2", false}, // the gate may be off
		{"v1.36.3", "containerd://2.0.7", false},
		{"v1.36.3", "containerd://1.7.27", false},
		{"v1.36.3", "cri-o://1.30.4", false},
		{"v1.36.3", "docker://28.1.1", false},
		{"v1.36.3", "", false},
		{"", "containerd://2.4.2", false},
		{"v1.36.3", "containerd://", false},
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: c.kubelet, ContainerRuntimeVersion: c.runtime}}}
		got, why := mountsImageVolumes(n)
		if got != c.want {
			t.Errorf("kubelet %q, runtime %q: %v (%s), want %v", c.kubelet, c.runtime, got, why, c.want)
		}
		if !got && why == "" {
			t.Errorf("kubelet %q, runtime %q: no reason given", c.kubelet, c.runtime)
		}
	}
}
