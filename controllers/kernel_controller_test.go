package controllers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
)

func kernelSpec(ns, name string) *nbv1.KernelSpec {
	return &nbv1.KernelSpec{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: nbv1.KernelSpecSpec{
			DisplayName: "Python 3", Language: "python",
			Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		},
	}
}

func kernel(ns, name, spec string) *nbv1.Kernel {
	return &nbv1.Kernel{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       nbv1.KernelParameters{Owner: "alice", KernelSpec: spec, Path: "work/dir"},
	}
}

// kernelCondition waits until the kernel's condition has the status and reason.
func kernelCondition(t *testing.T, k *nbv1.Kernel, typ string, status metav1.ConditionStatus, reason nbv1.ConditionReason) {
	t.Helper()
	eventually(t, fmt.Sprintf("kernel %s condition %s=%s/%s", k.Name, typ, status, reason), func() error {
		if err := get(k); err != nil {
			return err
		}
		c := meta.FindStatusCondition(k.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != string(reason) {
			return fmt.Errorf("conditions %+v", k.Status.Conditions)
		}
		if k.Status.ObservedGeneration != k.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", k.Status.ObservedGeneration, k.Generation)
		}
		return nil
	})
}

func kernelPod(t *testing.T, k *nbv1.Kernel) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
	eventually(t, "kernel pod", func() error { return get(pod) })
	return pod
}

// setPodStatus plays the kubelet: it writes the pod's status through the API.
func setPodStatus(t *testing.T, pod *corev1.Pod, mutate func(*corev1.PodStatus)) {
	t.Helper()
	eventually(t, "update pod status", func() error {
		if err := get(pod); err != nil {
			return err
		}
		mutate(&pod.Status)
		return k8sClient.Status().Update(context.Background(), pod)
	})
}

func TestKernel_CreatesSecretAndPodAndReportsReadiness(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, kernelSpec(ns, "python3"), k)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k1"}}
	eventually(t, "kernel secret", func() error { return get(secret) })
	if key, err := hex.DecodeString(string(secret.Data[agentapi.SecretKeyHMAC])); err != nil || len(key) != 32 {
		t.Errorf("HMAC key %q is not 32 random bytes in hex", secret.Data[agentapi.SecretKeyHMAC])
	}
	// The API server, which reads no Secrets, derives the same token from the Kernel.
	if got, want := string(secret.Data[agentapi.SecretKeyToken]), agenttoken.Kernel(agentTokenKey, ns, "k1", string(k.UID)); got != want {
		t.Errorf("agent token %q, want %q derived from the key and the kernel", got, want)
	}
	if !*secret.Immutable || !metav1.IsControlledBy(secret, k) {
		t.Errorf("secret %+v", secret)
	}

	pod := kernelPod(t, k)
	if !metav1.IsControlledBy(pod, k) {
		t.Errorf("pod owner references %v", pod.OwnerReferences)
	}
	if got := pod.Spec.Containers[0].WorkingDir; got != builder.ContentsDir+"/work/dir" {
		t.Errorf("working dir %s", got)
	}
	if got := pod.Spec.Volumes[len(pod.Spec.Volumes)-1].PersistentVolumeClaim.ClaimName; got != "contents" {
		t.Errorf("contents claim %s", got)
	}
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodPending)
	if k.Status.ExecutionState != nbv1.ExecutionStateStarting {
		t.Errorf("execution state %q while pending, want starting", k.Status.ExecutionState)
	}

	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.PodIP = "10.1.2.3"
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonAgentReady)
	if k.Status.PodIP != "10.1.2.3" || k.Status.ExecutionState != nbv1.ExecutionStateIdle {
		t.Errorf("pod IP %q state %q", k.Status.PodIP, k.Status.ExecutionState)
	}
	if meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed) != nil {
		t.Errorf("a ready kernel has a Failed condition: %v", k.Status.Conditions)
	}
}

func TestKernel_FailsFastOnPodProblems(t *testing.T) {
	tests := []struct {
		name       string
		status     func(*corev1.PodStatus)
		nodeName   bool
		wantReason nbv1.ConditionReason
		wantInMsg  string
	}{
		{
			name: "image pull back-off",
			status: func(s *corev1.PodStatus) {
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "nope:1"`}}}}
			},
			nodeName: true, wantReason: "ImagePullBackOff", wantInMsg: "nope:1",
		},
		{
			name: "crash loop",
			status: func(s *corev1.PodStatus) {
				s.InitContainerStatuses = []corev1.ContainerStatus{{Name: "install-agent", State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s"}}}}
			},
			nodeName: true, wantReason: "CrashLoopBackOff", wantInMsg: "install-agent",
		},
		{
			name: "unschedulable",
			status: func(s *corev1.PodStatus) {
				s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes have enough memory"}}
			},
			wantReason: nbv1.ReasonUnschedulable, wantInMsg: "enough memory",
		},
		{
			name: "kernel process failed",
			status: func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "No module named ipykernel"}}}}
			},
			nodeName: true, wantReason: nbv1.ReasonPodFailed, wantInMsg: "exited with code 2: No module named ipykernel",
		},
		{
			name: "out of memory",
			status: func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
			},
			nodeName: true, wantReason: "OOMKilled", wantInMsg: "code 137",
		},
	}
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"))
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := kernel(ns, fmt.Sprintf("fail-%d", i), "python3")
			create(t, k)
			pod := kernelPod(t, k)
			if tc.nodeName {
				// The node name is set by binding, as a scheduler does.
				b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
				if err := k8sClient.SubResource("binding").Create(context.Background(), pod, b); err != nil {
					t.Fatal(err)
				}
			}
			setPodStatus(t, pod, tc.status)
			kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, tc.wantReason)
			if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed); !strings.Contains(c.Message, tc.wantInMsg) {
				t.Errorf("message %q lacks %q", c.Message, tc.wantInMsg)
			}
			if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionReady); c.Status != metav1.ConditionFalse {
				t.Errorf("failed kernel is ready: %v", c)
			}
			if k.Status.ExecutionState != nbv1.ExecutionStateDead {
				t.Errorf("execution state %q, want dead", k.Status.ExecutionState)
			}
			// The failure is told where an admin looks: an event on the Kernel.
			eventually(t, "warning event on the kernel", func() error {
				return findEvent(ns, k.Name, "Kernel", nbv1.EventReason(tc.wantReason))
			})
		})
	}
}

// The scheduler calls a pod whose claims a provisioner still makes unschedulable; the kernel
// waits for the volume instead of failing (a start right after an install hit this).
func TestKernel_WaitsForItsVolumesToBeBound(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"))
	k := kernel(ns, "k1", "python3")
	create(t, k)
	pod := kernelPod(t, k)
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"}}
	})
	eventually(t, "the kernel says it waits for its volumes", func() error {
		if err := get(k); err != nil {
			return err
		}
		c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionReady)
		if c == nil || c.Reason != string(nbv1.ReasonPodPending) || !strings.Contains(c.Message, "volumes to be bound") {
			return fmt.Errorf("ready condition %+v", c)
		}
		return nil
	})
	if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed); c != nil {
		t.Fatalf("a kernel waiting for its volume failed: %+v", c)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := k8sClient.SubResource("binding").Create(context.Background(), pod, b); err != nil {
		t.Fatal(err)
	}
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.PodIP = "10.1.2.3"
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonAgentReady)
}

func findEvent(ns, regarding, kind string, reason nbv1.EventReason) error {
	var evs eventsv1.EventList
	if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		return err
	}
	var seen []string
	for _, e := range evs.Items {
		if e.Regarding.Name == regarding && e.Regarding.Kind == kind && e.Reason == string(reason) {
			return nil
		}
		seen = append(seen, e.Regarding.Kind+"/"+e.Regarding.Name+":"+e.Reason)
	}
	return fmt.Errorf("no %s event on %s %s; have %v", reason, kind, regarding, seen)
}

func TestKernel_WaitsForItsKernelSpec(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "later")
	create(t, k)
	kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelSpecNotFound)
	if err := get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k1"}}); err == nil {
		t.Error("a pod was made without a kernel spec")
	}
	create(t, kernelSpec(ns, "later"))
	kernelPod(t, k)
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodPending)
	if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed); c != nil {
		t.Errorf("Failed condition stays after the spec appeared: %v", c)
	}
}

func TestKernel_RefusesInvalidSpecAndForeignPod(t *testing.T) {
	ns := namespace(t)
	bad := kernelSpec(ns, "bad")
	bad.Spec.Env = map[string]string{"1NOT-A-NAME": "x"}
	create(t, bad)
	k := kernel(ns, "k1", "bad")
	create(t, k)
	kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelSpecInvalid)
	if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed); !strings.Contains(c.Message, "1NOT-A-NAME") {
		t.Errorf("message %q does not say what is wrong", c.Message)
	}

	create(t, kernelSpec(ns, "python3"))
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k2"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x:1"}}}}
	create(t, foreign)
	k2 := kernel(ns, "k2", "python3")
	create(t, k2)
	kernelCondition(t, k2, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonPodConflict)
}

// A step that fails (here: the pod is refused by a quota) is told in the status. It is no
// failure of the kernel: the refusal may pass, and the controller tries again.
func TestKernel_AFailedStepIsReportedInItsStatus(t *testing.T) {
	ns := namespace(t)
	exhaustQuota(t, ns, corev1.ResourcePods)
	k := kernel(ns, "k1", "python3")
	create(t, kernelSpec(ns, "python3"), k)
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonReconcileError)
	if r := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionReady); !strings.Contains(r.Message, "exceeded quota") {
		t.Errorf("Ready message %q does not say why", r.Message)
	}
	if f := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed); f != nil {
		t.Errorf("a refused pod made the kernel Failed: %+v", f)
	}
}

func TestKernel_KeepsRunningWhenItsSpecIsDeleted(t *testing.T) {
	ns := namespace(t)
	spec := kernelSpec(ns, "python3")
	k := kernel(ns, "k1", "python3")
	create(t, spec, k)
	pod := kernelPod(t, k)
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonAgentReady)
	if err := k8sClient.Delete(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	// Touch the kernel so that it is reconciled after the deletion.
	update(t, k, func(k *nbv1.Kernel) { k.Labels = map[string]string{"touched": "yes"} })
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonAgentReady)
}

func TestKernel_PodEventsAreReemittedOnTheKernel(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, kernelSpec(ns, "python3"), k)
	pod := kernelPod(t, k)
	now := metav1.Now()
	kubeletEvent := func(typ, reason, message string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, GenerateName: "k1."},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
			Reason:         reason, Message: message, Type: typ,
			Source:         corev1.EventSource{Component: "kubelet"},
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
	}
	// A routine event of every pod stays on the pod; a probe failure is copied.
	create(t, kubeletEvent(corev1.EventTypeNormal, "Started", "Started container kernel"))
	create(t, kubeletEvent(corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed: connection refused"))
	eventually(t, "re-emitted event", func() error {
		var evs eventsv1.EventList
		if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Kernel" && e.Reason == "Unhealthy" {
				if e.Related == nil || e.Related.Name != pod.Name || !strings.Contains(e.Note, "connection refused") {
					return fmt.Errorf("event %+v", e)
				}
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	// Events are handled in order: the routine one came first.
	var evs eventsv1.EventList
	if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Regarding.Kind == "Kernel" && e.Reason == "Started" {
			t.Errorf("the routine event was re-emitted: %+v", e)
		}
	}
}

func TestKernel_SchemaRejectsBadSpecs(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	escape := kernel(ns, "escape", "python3")
	escape.Spec.Path = "a/../../etc"
	if err := k8sClient.Create(ctx, escape); err == nil || !strings.Contains(err.Error(), "inside the contents root") {
		t.Errorf("path escaping the root: %v", err)
	}
	abs := kernel(ns, "abs", "python3")
	abs.Spec.Path = "/etc"
	if err := k8sClient.Create(ctx, abs); err == nil {
		t.Error("absolute path accepted")
	}
	k := kernel(ns, "k1", "python3")
	create(t, k)
	var err error
	eventually(t, "kernelSpec change refused", func() error {
		if err := get(k); err != nil {
			return err
		}
		k.Spec.KernelSpec = "other"
		if err = k8sClient.Update(ctx, k); apierrors.IsConflict(err) {
			return err
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("kernelSpec change: %v", err)
	}
	noConn := kernelSpec(ns, "noconn")
	noConn.Spec.Argv = []string{"python3", "-m", "ipykernel_launcher"}
	if err := k8sClient.Create(ctx, noConn); err == nil || !strings.Contains(err.Error(), "connection_file") {
		t.Errorf("argv without {connection_file}: %v", err)
	}
}

// runningKernel makes the kernel's pod ready at ip, as the kubelet would once the agent
// answers its readiness probe, and waits for the kernel to be Ready.
func runningKernel(t *testing.T, k *nbv1.Kernel, ip string) {
	t.Helper()
	setPodStatus(t, kernelPod(t, k), func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.PodIP = ip
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonAgentReady)
}

func TestKernel_StatusFollowsTheAgent(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, kernelSpec(ns, "python3"), k)
	const ip = "10.20.0.1"
	active := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	agents.report(ip, &agentapi.Status{ExecutionState: "busy", LastActivity: active.Add(250 * time.Millisecond), Connections: 2, RestartCount: 1, Ready: true})
	runningKernel(t, k, ip)
	eventually(t, "the agent's report in the status", func() error {
		if err := get(k); err != nil {
			return err
		}
		st := k.Status
		if st.ExecutionState != nbv1.ExecutionStateBusy || st.LastActivity == nil || !st.LastActivity.Time.Equal(active) || st.Connections != 2 || st.RestartCount != 1 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k.Name}}
	if err := get(secret); err != nil {
		t.Fatal(err)
	}
	if e, _ := agents.lastAsked(ip); e.Token != string(secret.Data[agentapi.SecretKeyToken]) || e.Port != agentapi.Port {
		t.Errorf("agent asked at port %d with a token that is not the kernel's", e.Port)
	}

	// Reports keep coming at the status interval; the last activity never moves back.
	agents.report(ip, &agentapi.Status{ExecutionState: "idle", LastActivity: active.Add(-time.Hour), Ready: true})
	eventually(t, "the next report", func() error {
		if err := get(k); err != nil {
			return err
		}
		if k.Status.ExecutionState != nbv1.ExecutionStateIdle || k.Status.Connections != 0 {
			return fmt.Errorf("status %+v", k.Status)
		}
		return nil
	})
	if !k.Status.LastActivity.Time.Equal(active) {
		t.Errorf("last activity moved back to %v", k.Status.LastActivity)
	}

	// An agent that stops answering leaves the last report: only the pod tells death.
	agents.report(ip, nil)
	_, before := agents.lastAsked(ip)
	eventually(t, "the kernel's agent asked twice more", func() error {
		if _, n := agents.lastAsked(ip); n < before+2 {
			return fmt.Errorf("asked %d times", n-before)
		}
		return nil
	})
	if err := get(k); err != nil {
		t.Fatal(err)
	}
	if k.Status.ExecutionState != nbv1.ExecutionStateIdle || !meta.IsStatusConditionTrue(k.Status.Conditions, nbv1.ConditionReady) {
		t.Errorf("an unreachable agent changed the status: %+v", k.Status)
	}
}

// staleKernels answers reads of Kernels with a copy taken earlier, as an informer's cache does
// for a moment after a write; everything else reads through.
type staleKernels struct {
	client.Client
	kernel *nbv1.Kernel
}

func (s staleKernels) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if k, ok := obj.(*nbv1.Kernel); ok && key == client.ObjectKeyFromObject(s.kernel) {
		s.kernel.DeepCopyInto(k)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

func TestKernel_StatusWriteLostToAStaleCacheIsWrittenOntoTheLiveKernelAtOnce(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, kernelSpec(ns, "python3"), k)
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodPending)
	stale := k.DeepCopy()
	// The suite's controller moves the kernel on (Ready, pod IP) past the stale copy.
	const ip = "10.20.0.9"
	runningKernel(t, k, ip)

	// A second reconciler reads the stale copy and hears a report the suite's agents do not
	// give, so its status differs from the live one and its first write conflicts.
	report := &agentDouble{}
	active := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	report.report(ip, &agentapi.Status{ExecutionState: "busy", LastActivity: active, Connections: 3, Ready: true})
	r := &controllers.KernelReconciler{
		Client: staleKernels{Client: k8sClient, kernel: stale}, APIReader: k8sClient,
		Recorder: events.NewFakeRecorder(10), Clock: clk, Rand: rand.Reader, Options: opts,
		Agents: report, StatusInterval: statusInterval,
	}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(k)})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != statusInterval {
		t.Errorf("requeued after %v, want the status interval %v as for any running kernel", res.RequeueAfter, statusInterval)
	}
	if err := get(k); err != nil {
		t.Fatal(err)
	}
	if st := k.Status; st.ExecutionState != nbv1.ExecutionStateBusy || st.Connections != 3 || st.PodIP != ip ||
		!meta.IsStatusConditionTrue(st.Conditions, nbv1.ConditionReady) {
		t.Errorf("live status after the reconcile: %+v", st)
	}
}

// A Secret that has the kernel's name but is not the kernel's is never adopted: not someone
// else's, which the manager's cache does not hold, nor a cluster's (a Kernel named like
// "<cluster>-ipcluster"), which it does. The kernel fails with SecretConflict and gets no pod,
// so it never runs with another's keys; the Secret is left as it was.
func TestKernel_AnotherResourcesSecretIsNotAdopted(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"))
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k-foreign"}, StringData: map[string]string{"token": "theirs"}}
	create(t, foreign)
	cl := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c9"}, Spec: nbv1.ClusterParameters{Owner: "alice", Engines: 0}}
	create(t, cl)
	clusterSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: builder.ClusterSecretName(cl)}}
	eventually(t, "the cluster's secret", func() error { return get(clusterSecret) })

	for _, name := range []string{"k-foreign", builder.ClusterSecretName(cl)} {
		k := kernel(ns, name, "python3")
		create(t, k)
		kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonSecretConflict)
		if err := get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); !apierrors.IsNotFound(err) {
			t.Errorf("kernel %s got a pod despite the conflict: %v", name, err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := get(s); err != nil {
			t.Fatal(err)
		}
		if metav1.IsControlledBy(s, k) || len(s.OwnerReferences) > 1 {
			t.Errorf("secret %s was adopted: owners %v", name, s.OwnerReferences)
		}
	}
}
