package builder

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/homes"
)

func testTerminal(mod func(*nbv1.Terminal)) *nbv1.Terminal {
	t := &nbv1.Terminal{
		ObjectMeta: metav1.ObjectMeta{Name: "t1", Namespace: "ns", UID: "uid-t1"},
		Spec:       nbv1.TerminalParameters{Owner: "alice", KernelSpec: "python3"},
	}
	if mod != nil {
		mod(t)
	}
	return t
}

// mountOf is the container's mount of the named volume.
func mountOf(c corev1.Container, volume string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == volume {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func TestTerminalPod_RunsTheAgentsTerminalInTheOwnersHome(t *testing.T) {
	opts := DefaultOptions()
	opts.ContentsClaim = "notebooks"
	opts.ImagePullPolicy = corev1.PullIfNotPresent
	var err error
	if opts.UserHome, err = homes.Parse("users/{username}"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		terminal       *nbv1.Terminal
		spec           *nbv1.KernelSpec
		image, dir     string
		subPath        string
		contentsClaim  string
		wantNoContents bool
	}{
		{name: "defaults: the owner's home", terminal: testTerminal(nil), spec: testSpec(nil),
			image: opts.DefaultKernelImage, dir: ContentsDir, subPath: "users/alice"},
		{name: "the spec's image, a cwd",
			terminal: testTerminal(func(t *nbv1.Terminal) { t.Spec.Cwd = "projects/a/" }),
			spec:     testSpec(func(s *nbv1.KernelSpec) { s.Spec.Image = "example.com/r:1" }),
			image:    "example.com/r:1", dir: ContentsDir + "/projects/a", subPath: "users/alice"},
		{name: "the whole volume, an admin's",
			terminal: testTerminal(func(t *nbv1.Terminal) { t.Spec.Home = nbv1.HomeWholeVolume }), spec: testSpec(nil),
			image: opts.DefaultKernelImage, dir: ContentsDir, subPath: ""},
		{name: "a home named in the spec",
			terminal: testTerminal(func(t *nbv1.Terminal) { t.Spec.Home = "shared/course" }), spec: testSpec(nil),
			image: opts.DefaultKernelImage, dir: ContentsDir, subPath: "shared/course"},
		{name: "an owner without a valid home gets no contents",
			terminal: testTerminal(func(t *nbv1.Terminal) { t.Spec.Owner = ".." }), spec: testSpec(nil),
			image: opts.DefaultKernelImage, dir: HomeDir, wantNoContents: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := TerminalPod(tc.terminal, tc.spec, opts)
			wantOwner := []metav1.OwnerReference{{APIVersion: "nbkube.io/v1alpha1", Kind: "Terminal", Name: "t1", UID: "uid-t1",
				Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}
			if d := cmp.Diff(wantOwner, pod.OwnerReferences); d != "" {
				t.Errorf("owner references (-want +got):\n%s", d)
			}
			if pod.Name != "t1" || pod.Namespace != "ns" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("pod %s/%s restart %s", pod.Namespace, pod.Name, pod.Spec.RestartPolicy)
			}
			c := pod.Spec.Containers[0]
			if c.Name != TerminalContainer || c.Image != tc.image || c.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("container %s image %s pull %s", c.Name, c.Image, c.ImagePullPolicy)
			}
			// No shell named: the agent picks one.
			if d := cmp.Diff([]string{AgentBinary, agentapi.CommandTerminal, "--dir", tc.dir}, c.Command); d != "" {
				t.Errorf("command (-want +got):\n%s", d)
			}
			if len(c.Args) != 0 {
				t.Errorf("args %v: the kernel spec's argv is not run", c.Args)
			}
			m := mountOf(c, "contents")
			switch {
			case tc.wantNoContents:
				if m != nil || c.WorkingDir != HomeDir {
					t.Errorf("contents mount %+v, working dir %s: want none and the scratch home", m, c.WorkingDir)
				}
			case m == nil:
				t.Fatal("no contents mount")
			case m.MountPath != ContentsDir || m.SubPath != tc.subPath || c.WorkingDir != ContentsDir:
				t.Errorf("contents at %s subPath %q, working dir %s; want %s %q, %s", m.MountPath, m.SubPath, c.WorkingDir, ContentsDir, tc.subPath, ContentsDir)
			}
			if s := mountOf(c, "kernel-secret"); s == nil || s.MountPath != SecretDir || !s.ReadOnly {
				t.Errorf("secret mount %+v", s)
			}
			for _, v := range pod.Spec.Volumes {
				if v.Name == "kernel-secret" && v.Secret.SecretName != "t1" {
					t.Errorf("secret volume of %s, want the terminal's own", v.Secret.SecretName)
				}
				if v.Name == "contents" && v.PersistentVolumeClaim.ClaimName != "notebooks" {
					t.Errorf("contents claim %s", v.PersistentVolumeClaim.ClaimName)
				}
			}
			env := envMap(c.Env)
			for k, want := range map[string]string{"HOME": HomeDir, agentapi.EnvPodIP: "from:status.podIP", agentapi.EnvAgentPort: "8777",
				agentapi.EnvSecretDir: SecretDir, agentapi.EnvTerminationLog: TerminationLog} {
				if env[k] != want {
					t.Errorf("env %s=%q, want %q", k, env[k], want)
				}
			}
			if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != agentapi.PathReadyz || p.HTTPGet.Port.StrVal != AgentPortName {
				t.Errorf("readiness probe %+v", p)
			}
			if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != agentapi.PathHealthz {
				t.Errorf("liveness probe %+v", c.LivenessProbe)
			}
			if c.TerminationMessagePath != TerminationLog {
				t.Errorf("terminationMessagePath %s", c.TerminationMessagePath)
			}
			if pod.Annotations[AnnotationSafeToEvict] != "false" {
				t.Errorf("annotations %v", pod.Annotations)
			}
		})
	}
}

// A terminal runs with its kernels' restrictions: the same pod and container security, no
// service account token, the same agent delivery, the spec's resources, env and template.
func TestTerminalPod_IsAKernelPodOfItsSpec(t *testing.T) {
	opts := DefaultOptions()
	opts.ContentsClaim = "notebooks"
	spec := testSpec(func(s *nbv1.KernelSpec) {
		s.Spec.PodTemplate = gpuTemplate()
		s.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
		s.Spec.Env = map[string]string{"PATH": "/opt/conda/bin:/usr/bin:/bin", "HOME": "/elsewhere", agentapi.EnvSecretDir: "/x"}
	})
	kernel := KernelPod(testKernel(nil), spec, opts)
	term := TerminalPod(testTerminal(nil), spec, opts)
	if d := cmp.Diff(kernel.Spec.SecurityContext, term.Spec.SecurityContext); d != "" {
		t.Errorf("pod security (-kernel +terminal):\n%s", d)
	}
	kc, tc := kernel.Spec.Containers[0], term.Spec.Containers[0]
	if d := cmp.Diff(kc.SecurityContext, tc.SecurityContext); d != "" {
		t.Errorf("container security (-kernel +terminal):\n%s", d)
	}
	if *term.Spec.AutomountServiceAccountToken != *kernel.Spec.AutomountServiceAccountToken || *term.Spec.EnableServiceLinks {
		t.Error("the terminal gets a token or service links its kernels do not")
	}
	if d := cmp.Diff(kc.Resources, tc.Resources); d != "" {
		t.Errorf("resources (-kernel +terminal):\n%s", d)
	}
	if d := cmp.Diff(kernel.Spec.InitContainers, term.Spec.InitContainers); d != "" {
		t.Errorf("agent delivery (-kernel +terminal):\n%s", d)
	}
	for _, f := range []struct {
		name     string
		got, was any
	}{
		{"nodeSelector", term.Spec.NodeSelector, kernel.Spec.NodeSelector},
		{"tolerations", term.Spec.Tolerations, kernel.Spec.Tolerations},
		{"affinity", term.Spec.Affinity, kernel.Spec.Affinity},
		{"runtimeClassName", term.Spec.RuntimeClassName, kernel.Spec.RuntimeClassName},
		{"priorityClassName", term.Spec.PriorityClassName, kernel.Spec.PriorityClassName},
	} {
		if d := cmp.Diff(f.was, f.got); d != "" {
			t.Errorf("%s (-kernel +terminal):\n%s", f.name, d)
		}
	}
	if mountOf(tc, "datasets") == nil || term.Labels["team"] != "vision" {
		t.Errorf("the template's mount and label are missing: %v, %v", tc.VolumeMounts, term.Labels)
	}
	env := envMap(tc.Env)
	if env["PATH"] != "/opt/conda/bin:/usr/bin:/bin" || env["HOME"] != HomeDir || env[agentapi.EnvSecretDir] != SecretDir {
		t.Errorf("env %v: want the spec's PATH, and HOME and the agent's own unchanged", env)
	}
}

// The network policies find terminal pods by their labels as they find kernel pods: the
// owner's label, and a component of their own that the policies of the chart and of nbkube
// local name beside kernels.
func TestTerminalPod_LabelsForThePolicies(t *testing.T) {
	pod := TerminalPod(testTerminal(func(t *nbv1.Terminal) { t.Spec.Owner = "ann@example.com" }), testSpec(nil), DefaultOptions())
	want := map[string]string{
		nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelComponent: ComponentTerminal, nbv1.LabelTerminal: "t1",
		nbv1.LabelKernelSpec: "python3", nbv1.LabelOwner: nbv1.OwnerLabelValue("ann@example.com"),
	}
	if d := cmp.Diff(want, pod.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	secret := TerminalSecret(testTerminal(nil), "tok")
	if _, ok := secret.Labels[nbv1.LabelOwner]; ok || secret.Labels[nbv1.LabelComponent] != ComponentTerminal {
		t.Errorf("secret labels %v", secret.Labels)
	}
	selected := func(name string) bool {
		for _, p := range LocalNetworkPolicies("ns") {
			if p.Name != name {
				continue
			}
			s, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			return s.Matches(labels.Set(pod.Labels))
		}
		t.Fatalf("no policy %s", name)
		return false
	}
	if !selected("nbkube-terminals") || !selected("nbkube-kernel-egress") || selected("nbkube-kernels") {
		t.Error("nbkube local's policies do not select the terminal pod as its ingress and egress policies")
	}
}

func TestTerminalSecret_IsImmutableOwnedAndHoldsTheToken(t *testing.T) {
	s := TerminalSecret(testTerminal(nil), "the-token")
	if s.Name != "t1" || s.Namespace != "ns" || s.Immutable == nil || !*s.Immutable {
		t.Errorf("secret %s/%s immutable %v", s.Namespace, s.Name, s.Immutable)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Terminal" || s.OwnerReferences[0].UID != "uid-t1" {
		t.Errorf("owner references %v", s.OwnerReferences)
	}
	if d := cmp.Diff(map[string]string{agentapi.SecretKeyToken: "the-token"}, s.StringData); d != "" {
		t.Errorf("data (-want +got):\n%s", d)
	}
}

func TestTerminalPod_AgentFromTheHostOrAnImage(t *testing.T) {
	local := DefaultOptions()
	local.AgentHostDir = "/usr/lib/nbkube"
	image := DefaultOptions()
	image.AgentDelivery = AgentImageVolume
	for _, o := range []Options{local, image} {
		pod := TerminalPod(testTerminal(nil), testSpec(nil), o)
		kernel := KernelPod(testKernel(nil), testSpec(nil), o)
		if pod.Spec.Containers[0].Command[0] != kernel.Spec.Containers[0].Command[0] || len(pod.Spec.InitContainers) != 0 {
			t.Errorf("%+v: agent %s, init containers %d; the kernels' is %s", o.AgentDelivery, pod.Spec.Containers[0].Command[0],
				len(pod.Spec.InitContainers), kernel.Spec.Containers[0].Command[0])
		}
		if d := cmp.Diff(kernel.Spec.Volumes[0], pod.Spec.Volumes[0]); d != "" {
			t.Errorf("agent volume (-kernel +terminal):\n%s", d)
		}
		if p := pod.Spec.Containers[0].ReadinessProbe; p.InitialDelaySeconds != kernel.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds {
			t.Errorf("readiness delay %d, the kernels' %d", p.InitialDelaySeconds, kernel.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds)
		}
	}
}
