package localnode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestAdmit_FailsPodsTheNodeCannotRun(t *testing.T) {
	runnable := func() *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Command: []string{"sleep", "1"}}},
			Volumes:    []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}}
	}
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   *podFailure
	}{
		{name: "a runnable pod", mutate: func(*corev1.Pod) {}, want: nil},
		{name: "no command", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Command = nil },
			want: &podFailure{reason: reasonNoCommand, message: "container main has no command: the local node runs no images, so there is no entrypoint to fall back on"}},
		{name: "an init container without command", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Args: []string{"x"}}}
		}, want: &podFailure{reason: reasonNoCommand, message: "container setup has no command: the local node runs no images, so there is no entrypoint to fall back on"}},
		{name: "an ephemeral volume", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}
		}, want: &podFailure{reason: reasonUnsupportedVolume, message: "volume scratch: ephemeral volumes are not supported by the local node"}},
		{name: "a gRPC probe", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9}}}
		}, want: &podFailure{reason: reasonUnsupportedProbe, message: "container main: gRPC probes are not supported by the local node"}},
		{name: "a sidecar", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Command: []string{"x"}, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
		}, want: &podFailure{reason: reasonUnsupportedSidecar, message: "init container proxy: sidecar containers (restartPolicy on an init container) are not supported by the local node"}},
	}
	for _, tt := range tests {
		pod := runnable()
		tt.mutate(pod)
		if diff := cmp.Diff(tt.want, admit(pod), cmp.AllowUnexported(podFailure{})); diff != "" {
			t.Errorf("%s: failure (-want +got):\n%s", tt.name, diff)
		}
	}
}
