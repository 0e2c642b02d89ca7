package builder

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

func testKernel(mod func(*nbv1.Kernel)) *nbv1.Kernel {
	k := &nbv1.Kernel{
		ObjectMeta: metav1.ObjectMeta{Name: "k1", Namespace: "ns", UID: "uid-k1"},
		Spec:       nbv1.KernelParameters{Owner: "alice", KernelSpec: "python3"},
	}
	if mod != nil {
		mod(k)
	}
	return k
}

func testSpec(mod func(*nbv1.KernelSpec)) *nbv1.KernelSpec {
	s := &nbv1.KernelSpec{
		ObjectMeta: metav1.ObjectMeta{Name: "python3", Namespace: "ns"},
		Spec: nbv1.KernelSpecSpec{
			DisplayName: "Python 3", Language: "python",
			Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		},
	}
	if mod != nil {
		mod(s)
	}
	return s
}

func envMap(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		if e.ValueFrom != nil {
			m[e.Name] = "from:" + e.ValueFrom.FieldRef.FieldPath
			continue
		}
		m[e.Name] = e.Value
	}
	return m
}

func TestKernelPod_Shape(t *testing.T) {
	opts := DefaultOptions()
	opts.ContentsClaim = "notebooks"
	opts.ImagePullPolicy = corev1.PullIfNotPresent
	tests := []struct {
		name      string
		kernel    *nbv1.Kernel
		spec      *nbv1.KernelSpec
		image     string
		workDir   string
		interrupt string
	}{
		{name: "defaults", kernel: testKernel(nil), spec: testSpec(nil),
			image: opts.DefaultKernelImage, workDir: "/home/jovyan/work", interrupt: "signal"},
		{name: "spec image and interrupt mode",
			kernel: testKernel(nil),
			spec: testSpec(func(s *nbv1.KernelSpec) {
				s.Spec.Image, s.Spec.InterruptMode = "example.com/r:1", nbv1.InterruptModeMessage
			}),
			image: "example.com/r:1", workDir: "/home/jovyan/work", interrupt: "message"},
		{name: "path sets the working directory",
			kernel: testKernel(func(k *nbv1.Kernel) { k.Spec.Path = "projects/a/" }),
			spec:   testSpec(nil), image: opts.DefaultKernelImage,
			workDir: "/home/jovyan/work/projects/a", interrupt: "signal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := KernelPod(tc.kernel, tc.spec, opts)
			if pod.Name != "k1" || pod.Namespace != "ns" {
				t.Errorf("pod %s/%s, want ns/k1", pod.Namespace, pod.Name)
			}
			wantOwner := []metav1.OwnerReference{{APIVersion: "nbkube.io/v1alpha1", Kind: "Kernel", Name: "k1", UID: "uid-k1",
				Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}
			if d := cmp.Diff(wantOwner, pod.OwnerReferences); d != "" {
				t.Errorf("owner references (-want +got):\n%s", d)
			}
			main := pod.Spec.Containers[0]
			if main.Image != tc.image || main.WorkingDir != tc.workDir {
				t.Errorf("image %q workdir %q, want %q %q", main.Image, main.WorkingDir, tc.image, tc.workDir)
			}
			if main.TerminationMessagePath != TerminationLog {
				t.Errorf("terminationMessagePath %q: the agent writes %q", main.TerminationMessagePath, TerminationLog)
			}
			if d := cmp.Diff([]string{"/opt/nbkube/bin/nbkube-agent", "--"}, main.Command); d != "" {
				t.Errorf("command (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.spec.Spec.Argv, main.Args); d != "" {
				t.Errorf("args (-want +got):\n%s", d)
			}
			if got := envMap(main.Env)[agentapi.EnvInterruptMode]; got != tc.interrupt {
				t.Errorf("interrupt mode %q, want %q", got, tc.interrupt)
			}
			init := pod.Spec.InitContainers[0]
			if d := cmp.Diff([]string{opts.AgentBinary, "install", "/opt/nbkube/bin/nbkube-agent"}, init.Command); d != "" {
				t.Errorf("init command (-want +got):\n%s", d)
			}
			if init.Image != opts.AgentImage || main.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("init image %q pull policy %q", init.Image, main.ImagePullPolicy)
			}
			claim := pod.Spec.Volumes[len(pod.Spec.Volumes)-1].PersistentVolumeClaim
			if claim == nil || claim.ClaimName != "notebooks" {
				t.Errorf("contents volume %+v, want claim notebooks", claim)
			}
			if pod.Labels[nbv1.LabelKernel] != "k1" || pod.Labels[nbv1.LabelKernelSpec] != "python3" {
				t.Errorf("labels %v", pod.Labels)
			}
		})
	}
}

// Under nbkube local the agent is mounted from the host where it lies, read-only, instead of
// copied by an init container.
func TestKernelPod_AgentFromAHostDirectory(t *testing.T) {
	opts := DefaultOptions()
	opts.AgentHostDir = "/opt/nbkube/bin"
	pod := KernelPod(testKernel(nil), testSpec(nil), opts)
	if len(pod.Spec.InitContainers) != 0 {
		t.Errorf("init containers %v", pod.Spec.InitContainers)
	}
	var vol *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == "agent-bin" {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.HostPath == nil || vol.HostPath.Path != "/opt/nbkube/bin" || vol.EmptyDir != nil ||
		vol.HostPath.Type == nil || *vol.HostPath.Type != corev1.HostPathDirectory {
		t.Fatalf("agent-bin volume %+v", vol)
	}
	kernel := pod.Spec.Containers[0]
	if kernel.Command[0] != AgentBinary {
		t.Errorf("kernel command %v", kernel.Command)
	}
	for _, m := range kernel.VolumeMounts {
		if m.Name == "agent-bin" && (!m.ReadOnly || m.MountPath != AgentBinDir) {
			t.Errorf("agent-bin mount %+v", m)
		}
	}
	// Without it, the copy.
	if pod := KernelPod(testKernel(nil), testSpec(nil), DefaultOptions()); len(pod.Spec.InitContainers) != 1 || pod.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("default pod: init containers %d, agent-bin %+v", len(pod.Spec.InitContainers), pod.Spec.Volumes[0])
	}
}

// With AgentImageVolume the operator's image is mounted read-only and the agent runs from
// it: no init container, in kernel pods and the reStructuredText renderer's alike. The host
// directory of nbkube local still wins.
func TestKernelPod_AgentFromAnImageVolume(t *testing.T) {
	opts := DefaultOptions()
	opts.AgentDelivery = AgentImageVolume
	opts.AgentImage = "example.com/nbkube:1"
	opts.ImagePullPolicy = corev1.PullIfNotPresent
	kernelPod := KernelPod(testKernel(nil), testSpec(nil), opts)
	rst := RSTRendererDeployment("ns", "uid", opts, nil).Spec.Template.Spec
	for name, spec := range map[string]corev1.PodSpec{"kernel": kernelPod.Spec, "renderer": rst} {
		if len(spec.InitContainers) != 0 {
			t.Errorf("%s: init containers %v", name, spec.InitContainers)
		}
		want := corev1.Volume{Name: "agent-bin", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
			Reference: "example.com/nbkube:1", PullPolicy: corev1.PullIfNotPresent}}}
		if d := cmp.Diff(want, spec.Volumes[0]); d != "" {
			t.Errorf("%s: agent volume (-want +got):\n%s", name, d)
		}
		main := spec.Containers[0]
		if main.Command[0] != "/opt/nbkube/image/usr/local/bin/nbkube-agent" {
			t.Errorf("%s: command %v", name, main.Command)
		}
		mounted := false
		for _, m := range main.VolumeMounts {
			if m.Name == "agent-bin" {
				mounted = m.ReadOnly && m.MountPath == AgentImageDir && m.SubPath == ""
			}
		}
		if !mounted {
			t.Errorf("%s: mounts %+v, want agent-bin read-only at %s", name, main.VolumeMounts, AgentImageDir)
		}
	}
	opts.AgentHostDir = "/opt/nbkube/bin"
	if pod := KernelPod(testKernel(nil), testSpec(nil), opts); pod.Spec.Volumes[0].HostPath == nil || pod.Spec.Containers[0].Command[0] != AgentBinary {
		t.Errorf("nbkube local: agent volume %+v, command %v", pod.Spec.Volumes[0], pod.Spec.Containers[0].Command)
	}
	if _, err := ParseAgentDelivery("imagevolume"); err == nil {
		t.Error("ParseAgentDelivery took a value that is not one")
	}
}

// A kubelet probes readiness first when it sees the container running; one probe skipped for
// an initial delay would hold the pod's readiness a whole period. nbkube local's node probes
// at the process's start, before the agent listens.
func TestKernelPod_ReadinessProbedAtOnceByAKubelet(t *testing.T) {
	local := DefaultOptions()
	local.AgentHostDir = "/opt/nbkube/bin"
	for _, tc := range []struct {
		name  string
		opts  Options
		delay int32
	}{{"cluster", DefaultOptions(), 0}, {"nbkube local", local, 1}} {
		p := KernelPod(testKernel(nil), testSpec(nil), tc.opts).Spec.Containers[0].ReadinessProbe
		if p == nil || p.InitialDelaySeconds != tc.delay {
			t.Errorf("%s: readiness probe %+v, want an initial delay of %d s", tc.name, p, tc.delay)
		}
	}
}

func TestKernelPod_IsLeastPrivilege(t *testing.T) {
	pod := KernelPod(testKernel(nil), testSpec(nil), DefaultOptions())
	if *pod.Spec.AutomountServiceAccountToken || *pod.Spec.EnableServiceLinks {
		t.Error("kernel pods must not get API credentials or service links")
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %s: a dead kernel must be reported, not silently replaced", pod.Spec.RestartPolicy)
	}
	ps := pod.Spec.SecurityContext
	if !*ps.RunAsNonRoot || *ps.RunAsUser != 1000 || *ps.FSGroup != 100 || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", ps)
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		sc := c.SecurityContext
		if *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("container %s security context %+v", c.Name, sc)
		}
	}
	// Everything the kernel writes outside the contents must be a volume, the root is read-only.
	mounts := map[string]bool{}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounts[m.MountPath] = !m.ReadOnly
	}
	for _, dir := range []string{HomeDir, "/tmp", ContentsDir} {
		if !mounts[dir] {
			t.Errorf("%s is not a writable mount", dir)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && (v.Secret.SecretName != "k1" || *v.Secret.DefaultMode != 0o440) {
			t.Errorf("secret volume %+v", v.Secret)
		}
	}
}

func TestKernelPod_EnvLayersAndReservedNames(t *testing.T) {
	spec := testSpec(func(s *nbv1.KernelSpec) {
		s.Spec.Env = map[string]string{"A": "spec", "B": "spec", "NBKUBE_KERNEL_ID": "evil", "HOME": "/root"}
	})
	kernel := testKernel(func(k *nbv1.Kernel) {
		k.Spec.Env = map[string]string{"B": "kernel", "C": "kernel"}
		k.Spec.Path = "nb/./sub/"
	})
	pod := KernelPod(kernel, spec, DefaultOptions())
	env := pod.Spec.Containers[0].Env
	if wd := pod.Spec.Containers[0].WorkingDir; wd != ContentsDir+"/nb/sub" {
		t.Errorf("working directory %s", wd)
	}
	want := map[string]string{
		"A": "spec", "B": "kernel", "C": "kernel",
		"HOME":                     HomeDir,
		agentapi.EnvKernelID:       "k1",
		agentapi.EnvNamespace:      "from:metadata.namespace",
		agentapi.EnvPodIP:          "from:status.podIP",
		agentapi.EnvAgentPort:      "8777",
		agentapi.EnvSecretDir:      SecretDir,
		agentapi.EnvInterruptMode:  "signal",
		agentapi.EnvTerminationLog: TerminationLog,
		agentapi.EnvKernelPath:     "nb/sub",
	}
	if d := cmp.Diff(want, envMap(env)); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if len(env) != len(want) {
		t.Errorf("%d env vars, want %d (duplicates?): %v", len(env), len(want), env)
	}
	if env[0].Name != "A" || env[1].Name != "B" || env[2].Name != "C" {
		t.Errorf("user env not sorted first: %v", env[:3])
	}
}

func TestKernelPod_ResourcesFromSpecAreCopied(t *testing.T) {
	spec := testSpec(func(s *nbv1.KernelSpec) {
		s.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	})
	pod := KernelPod(testKernel(nil), spec, DefaultOptions())
	pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("2Gi")
	if got := spec.Spec.Resources.Limits[corev1.ResourceMemory]; got.String() != "1Gi" {
		t.Errorf("builder shares the KernelSpec's resources: spec now says %s", got.String())
	}
}

func TestKernelSecret_IsImmutableAndOwned(t *testing.T) {
	s := KernelSecret(testKernel(nil), "hmac", "tok")
	if !*s.Immutable || s.StringData[agentapi.SecretKeyHMAC] != "hmac" || s.StringData[agentapi.SecretKeyToken] != "tok" {
		t.Errorf("secret %+v", s)
	}
	if s.Name != "k1" || s.OwnerReferences[0].UID != "uid-k1" || !*s.OwnerReferences[0].Controller {
		t.Errorf("secret meta %+v", s.ObjectMeta)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestScratchVolumes_AreBoundedAndRequested(t *testing.T) {
	o := DefaultOptions()
	o.ScratchSize, o.ScratchRequest = resource.MustParse("2Gi"), resource.MustParse("100Mi")
	pods := map[string]*corev1.Pod{
		"kernel":     KernelPod(testKernel(nil), testSpec(nil), o),
		"controller": ClusterControllerPod(testCluster(1), o),
		"engine":     ClusterEnginePod(testCluster(1), o, "u"),
	}
	for name, pod := range pods {
		scratch := 0
		for _, v := range pod.Spec.Volumes {
			if v.EmptyDir == nil || v.Name == "agent-bin" {
				continue
			}
			scratch++
			if v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "2Gi" {
				t.Errorf("%s: scratch volume %s has size limit %v, want 2Gi", name, v.Name, v.EmptyDir.SizeLimit)
			}
		}
		if scratch != 2 {
			t.Errorf("%s: %d scratch volumes, want 2", name, scratch)
		}
		if got := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage]; got.String() != "100Mi" {
			t.Errorf("%s: ephemeral-storage request %s, want 100Mi", name, got.String())
		}
	}

	// A spec's own ephemeral storage, request or limit, is kept as it is.
	spec := testSpec(func(s *nbv1.KernelSpec) {
		s.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("5Gi")}
	})
	pod := KernelPod(testKernel(nil), spec, o)
	if _, ok := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage]; ok {
		t.Errorf("a request was added below the spec's limit: %v", pod.Spec.Containers[0].Resources)
	}
	if _, ok := spec.Spec.Resources.Requests[corev1.ResourceEphemeralStorage]; ok {
		t.Error("the builder wrote into the KernelSpec's resources")
	}
	c := testCluster(1)
	c.Spec.EngineResources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("3Gi")}
	if got := ClusterEnginePod(c, o, "u").Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage]; got.String() != "3Gi" {
		t.Errorf("engine's own request replaced: %s", got.String())
	}
	if _, ok := c.Spec.EngineResources.Requests[corev1.ResourceEphemeralStorage]; !ok || len(c.Spec.EngineResources.Requests) != 1 {
		t.Error("the builder changed the Cluster's resources")
	}

	// Zero options leave both out.
	o.ScratchSize, o.ScratchRequest = resource.Quantity{}, resource.Quantity{}
	pod = KernelPod(testKernel(nil), testSpec(nil), o)
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			t.Errorf("unbounded options bound %s", v.Name)
		}
	}
	if _, ok := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage]; ok {
		t.Error("zero ScratchRequest requested storage")
	}
}

// The manager's agent memory budget reaches the agent as a flag; without one the agent keeps
// its own default.
func TestKernelPod_AgentMemoryBudget(t *testing.T) {
	opts := DefaultOptions()
	opts.AgentMemoryBudget = resource.MustParse("64Mi")
	pod := KernelPod(testKernel(nil), testSpec(nil), opts)
	if d := cmp.Diff([]string{AgentBinary, "--memory-budget=67108864", "--"}, pod.Spec.Containers[0].Command); d != "" {
		t.Errorf("command (-want +got):\n%s", d)
	}
	pod = KernelPod(testKernel(nil), testSpec(nil), DefaultOptions())
	if d := cmp.Diff([]string{AgentBinary, "--"}, pod.Spec.Containers[0].Command); d != "" {
		t.Errorf("command without a budget (-want +got):\n%s", d)
	}
}
