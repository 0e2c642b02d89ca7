package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
)

// terminal is a Terminal of alice, as the API server or kubectl would make it.
func terminal(ns, name, spec string) *nbv1.Terminal {
	return &nbv1.Terminal{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       nbv1.TerminalParameters{Owner: "alice", KernelSpec: spec},
	}
}

// terminalIs waits until the terminal has the phase and its Ready condition the reason.
func terminalIs(t *testing.T, term *nbv1.Terminal, phase nbv1.TerminalPhase, reason nbv1.ConditionReason) {
	t.Helper()
	eventually(t, fmt.Sprintf("terminal %s %s/%s", term.Name, phase, reason), func() error {
		if err := get(term); err != nil {
			return err
		}
		c := meta.FindStatusCondition(term.Status.Conditions, nbv1.ConditionReady)
		if term.Status.Phase != phase || c == nil || c.Reason != string(reason) {
			return fmt.Errorf("phase %s, conditions %+v", term.Status.Phase, term.Status.Conditions)
		}
		if (c.Status == metav1.ConditionTrue) != (phase == nbv1.TerminalRunning) {
			return fmt.Errorf("Ready is %s in phase %s", c.Status, phase)
		}
		if term.Status.ObservedGeneration != term.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", term.Status.ObservedGeneration, term.Generation)
		}
		return nil
	})
}

func terminalPod(t *testing.T, term *nbv1.Terminal) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: term.Namespace, Name: term.Name}}
	eventually(t, "terminal pod", func() error { return get(pod) })
	return pod
}

// runTerminalPod plays the kubelet of a terminal pod whose agent is ready at ip.
func runTerminalPod(t *testing.T, pod *corev1.Pod, ip string) {
	t.Helper()
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.PodIP = ip
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.TerminalContainer, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	})
}

func mountOf(c corev1.Container, volume string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == volume {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func TestTerminal_GetsASecretAndAPodInItsOwnersHomeAndRunsUntilTheShellExits(t *testing.T) {
	ns := namespace(t)
	term := terminal(ns, "t1", "python3")
	term.Spec.Cwd = "projects/a"
	create(t, kernelSpec(ns, "python3"), term)

	// The Secret is named as the Terminal and holds the token the API server derives too.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t1"}}
	eventually(t, "terminal secret", func() error { return get(secret) })
	if got, want := string(secret.Data[agentapi.SecretKeyToken]), agenttoken.Terminal(agentTokenKey, ns, "t1", string(term.UID)); got != want {
		t.Errorf("agent token %q, want %q derived from the key and the terminal", got, want)
	}
	if got := agenttoken.Kernel(agentTokenKey, ns, "t1", string(term.UID)); string(secret.Data[agentapi.SecretKeyToken]) == got {
		t.Error("the terminal's token is that of a kernel of its name")
	}
	if !*secret.Immutable || !metav1.IsControlledBy(secret, term) || secret.Labels[nbv1.LabelComponent] != builder.ComponentTerminal {
		t.Errorf("secret %+v", secret.ObjectMeta)
	}

	pod := terminalPod(t, term)
	// Deleting the Terminal collects its pod and secret (envtest has no garbage collector:
	// the references are what it follows).
	for _, o := range []metav1.Object{pod, secret} {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.Kind != "Terminal" || ref.UID != term.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("%s's controller %+v", o.GetName(), ref)
		}
	}
	for k, want := range map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelComponent: builder.ComponentTerminal,
		nbv1.LabelTerminal: "t1", nbv1.LabelOwner: "alice"} {
		if pod.Labels[k] != want {
			t.Errorf("pod label %s=%q, want %q", k, pod.Labels[k], want)
		}
	}
	c := pod.Spec.Containers[0]
	if want := []string{builder.AgentBinary, agentapi.CommandTerminal, "--dir", builder.ContentsDir + "/projects/a"}; !slices.Equal(c.Command, want) {
		t.Errorf("command %v, want %v", c.Command, want)
	}
	// The suite's homes are {username}, and alice has no claim of her own.
	if m := mountOf(c, "contents"); m == nil || m.MountPath != builder.ContentsDir || m.SubPath != "alice" {
		t.Errorf("contents mount %+v, want alice's home at %s", m, builder.ContentsDir)
	}
	if m := mountOf(c, "kernel-secret"); m == nil || m.MountPath != builder.SecretDir {
		t.Errorf("secret mount %+v", m)
	}
	terminalIs(t, term, nbv1.TerminalPending, nbv1.ReasonPodPending)

	const ip = "10.43.0.1"
	last := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	agents.reportTerminal(ip, &agentapi.TerminalStatus{LastActivity: last, Connections: 2})
	runTerminalPod(t, pod, ip)
	terminalIs(t, term, nbv1.TerminalRunning, nbv1.ReasonAgentReady)
	eventually(t, "the agent's report in the status", func() error {
		if err := get(term); err != nil {
			return err
		}
		if term.Status.PodIP != ip || term.Status.Connections != 2 || term.Status.LastActivity == nil || !term.Status.LastActivity.Time.Equal(last) {
			return fmt.Errorf("status %+v", term.Status)
		}
		return nil
	})
	if e, _ := agents.lastAsked(ip); e.Token != string(secret.Data[agentapi.SecretKeyToken]) || e.Port != agentapi.Port {
		t.Errorf("the agent was asked at port %d with token %q", e.Port, e.Token)
	}

	// The user types exit: the agent ends with the shell, and so does the pod.
	agents.reportTerminal(ip, nil)
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodSucceeded
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.TerminalContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	})
	terminalIs(t, term, nbv1.TerminalEnded, nbv1.ReasonShellExited)
	if term.Status.PodIP != "" || term.Status.Connections != 0 || !term.Status.LastActivity.Time.Equal(last) {
		t.Errorf("an ended terminal's status %+v: want no address, no connections, its last activity", term.Status)
	}
	// Then it is forgotten, as Jupyter forgets a terminal whose shell exited: not at once (its
	// clients are told), but once the grace has passed.
	clk.Step(10 * time.Second)
	touch := func() {
		t.Helper()
		patch := client.MergeFrom(term.DeepCopy())
		term.Annotations = map[string]string{"test/touched": clk.Now().String()}
		if err := k8sClient.Patch(context.Background(), term, patch); err != nil {
			t.Fatal(err)
		}
	}
	touch()
	time.Sleep(time.Second)
	if err := get(term); err != nil {
		t.Fatalf("an ended terminal deleted before its grace: %v", err)
	}
	clk.Step(time.Minute)
	touch()
	eventually(t, "the ended terminal deleted", func() error {
		if err := get(term); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w), phase %s", err, term.Status.Phase)
		}
		return nil
	})
}

// The agent's answer makes a terminal Running before the kubelet's readiness probe does
// (nbkube local's first probe comes a second after the start).
func TestTerminal_RunningOnceItsAgentAnswersBeforeTheProbe(t *testing.T) {
	ns := namespace(t)
	term := terminal(ns, "early", "python3")
	create(t, kernelSpec(ns, "python3"), term)
	pod := terminalPod(t, term)
	const ip = "10.43.0.2"
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.PodIP = ip
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.TerminalContainer,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	})
	// Not listening yet: the address is in the status already, for a client that asks the
	// agent itself, and the terminal is not Running.
	eventually(t, "the pod's address", func() error {
		if err := get(term); err != nil {
			return err
		}
		if term.Status.PodIP != ip || term.Status.Phase != nbv1.TerminalPending {
			return fmt.Errorf("status %+v", term.Status)
		}
		return nil
	})
	agents.reportTerminal(ip, &agentapi.TerminalStatus{LastActivity: time.Now()})
	terminalIs(t, term, nbv1.TerminalRunning, nbv1.ReasonAgentReady)
}

// The status says why a terminal's pod did not run or ended: the kubelet's and the
// scheduler's words (containerd's messages here), with the terminal's message.
func TestTerminal_StatusSaysWhyItsPodDidNotRunOrEnded(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      func(*corev1.PodStatus)
		phase       nbv1.TerminalPhase
		reason      nbv1.ConditionReason
		wantInMsg   string
		wantNoPodIP bool
	}{
		{name: "out of memory", phase: nbv1.TerminalFailed, reason: "OOMKilled", wantInMsg: "ran out of memory", wantNoPodIP: true,
			status: func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.TerminalContainer, State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
			}},
		{name: "evicted", phase: nbv1.TerminalFailed, reason: "Evicted", wantInMsg: "ephemeral local storage", wantNoPodIP: true,
			status: func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.Reason = "Evicted"
				s.Message = "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. "
			}},
		{name: "an image that does not exist", phase: nbv1.TerminalFailed, reason: "ImagePullBackOff", wantInMsg: "Back-off pulling image",
			status: func(s *corev1.PodStatus) {
				s.Phase = corev1.PodPending
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.TerminalContainer, State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "example.com/nope:1"`}}}}
			}},
		{name: "a pull that may work next time", phase: nbv1.TerminalPending, reason: "ErrImagePull", wantInMsg: "i/o timeout",
			status: func(s *corev1.PodStatus) {
				s.Phase = corev1.PodPending
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.TerminalContainer, State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: `failed to pull and unpack image "example.com/py:1": dial tcp 10.0.0.9:443: i/o timeout`}}}}
			}},
		{name: "no node fits", phase: nbv1.TerminalFailed, reason: nbv1.ReasonUnschedulable, wantInMsg: "Insufficient memory",
			status: func(s *corev1.PodStatus) {
				s.Phase = corev1.PodPending
				s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
					Message: "0/3 nodes are available: 3 Insufficient memory."}}
			}},
		{name: "the agent could not start the shell", phase: nbv1.TerminalFailed, reason: nbv1.ReasonPodFailed, wantInMsg: "no such file or directory", wantNoPodIP: true,
			status: func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.TerminalContainer, State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
						Message: "starting /bin/bash on a terminal: chdir /home/jovyan/work/gone: no such file or directory"}}}}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t)
			term := terminal(ns, "t", "python3")
			create(t, kernelSpec(ns, "python3"), term)
			pod := terminalPod(t, term)
			if tc.reason != nbv1.ReasonUnschedulable {
				// The node name is set by binding, as a scheduler does.
				b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
				if err := k8sClient.SubResource("binding").Create(context.Background(), pod, b); err != nil {
					t.Fatal(err)
				}
			}
			setPodStatus(t, pod, func(s *corev1.PodStatus) {
				s.PodIP = "10.43.1.1"
				tc.status(s)
			})
			terminalIs(t, term, tc.phase, tc.reason)
			if c := meta.FindStatusCondition(term.Status.Conditions, nbv1.ConditionReady); !strings.Contains(c.Message, tc.wantInMsg) {
				t.Errorf("message %q lacks %q", c.Message, tc.wantInMsg)
			}
			if tc.wantNoPodIP && term.Status.PodIP != "" {
				t.Errorf("an ended terminal keeps the address %s", term.Status.PodIP)
			}
		})
	}
}

// A terminal's shell is its pod's: a pod deleted from outside is not replaced, and the
// Terminal says what happened.
func TestTerminal_APodDeletedFromOutsideIsNotReplaced(t *testing.T) {
	ns := namespace(t)
	term := terminal(ns, "gone", "python3")
	create(t, kernelSpec(ns, "python3"), term)
	pod := terminalPod(t, term)
	runTerminalPod(t, pod, "10.43.2.1")
	terminalIs(t, term, nbv1.TerminalRunning, nbv1.ReasonAgentReady)
	if err := k8sClient.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	terminalIs(t, term, nbv1.TerminalFailed, nbv1.ReasonPodDeleted)
	if term.Status.PodIP != "" {
		t.Errorf("address %s kept", term.Status.PodIP)
	}
	// Long enough for a reconcile that would make one.
	time.Sleep(500 * time.Millisecond)
	if err := get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}); !apierrors.IsNotFound(err) {
		t.Errorf("a new pod for the terminal (%v)", err)
	}
}

// A terminal of a spec that is not there waits for it, and starts when it comes.
func TestTerminal_OfAMissingSpecStartsWhenTheSpecIsMade(t *testing.T) {
	ns := namespace(t)
	term := terminal(ns, "later", "later")
	create(t, term)
	terminalIs(t, term, nbv1.TerminalFailed, nbv1.ReasonKernelSpecNotFound)
	create(t, kernelSpec(ns, "later"))
	terminalPod(t, term)
	terminalIs(t, term, nbv1.TerminalPending, nbv1.ReasonPodPending)
}

// terminalOf is a Terminal of owner, as kubectl would make it.
func terminalOf(ns, name, spec, owner string) *nbv1.Terminal {
	term := terminal(ns, name, spec)
	term.Spec.Owner = nbv1.Owner(owner)
	return term
}

// A user's policy holds Terminals made with kubectl to its terminals limit, as it holds
// Kernels: the one too many gets no pod and says why, and gets one when the room is freed.
func TestTerminal_KubectlTerminalsAreHeldToTheirOwnersLimit(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"),
		userPolicy(ns, "ann", nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{Terminals: i32(1)}}))
	first := terminalOf(ns, "ann-1", "python3", "ann")
	create(t, first)
	terminalPod(t, first)
	userUsage(t, ns, "ann", func(u *nbv1.UserUsage) error {
		if len(u.Spec.Reservations) != 1 || u.Spec.Reservations[0].Kind != nbv1.ReservationTerminal || u.Status.Terminals != "1/1" {
			return fmt.Errorf("reservations %+v, terminals %q", u.Spec.Reservations, u.Status.Terminals)
		}
		return nil
	})
	second := terminalOf(ns, "ann-2", "python3", "ann")
	create(t, second)
	terminalIs(t, second, nbv1.TerminalFailed, nbv1.ReasonQuotaExceeded)
	if c := meta.FindStatusCondition(second.Status.Conditions, nbv1.ConditionReady); !strings.Contains(c.Message, "terminals") {
		t.Errorf("message %q does not name the limit", c.Message)
	}
	if err := get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ann-2"}}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused terminal has a pod (%v)", err)
	}

	// A reservation whose resource is missing is kept for a minute from its making: the
	// controllers' clock moves past that (see TestQuota_ADeletedKernelsRoomGoesToARefusedOne).
	clk.Step(2 * time.Minute)
	if err := k8sClient.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	terminalPod(t, second)
	terminalIs(t, second, nbv1.TerminalPending, nbv1.ReasonPodPending)
}

// terminal_currently_running_total counts the terminals that run, as Jupyter Server's gauge.
func TestTerminal_RunningTerminalsAreCounted(t *testing.T) {
	ns := namespace(t)
	running := func() float64 { return metric(t, "terminal_currently_running_total").GetGauge().GetValue() }
	before := running()
	term := terminal(ns, "counted", "python3")
	create(t, kernelSpec(ns, "python3"), term)
	pod := terminalPod(t, term)
	runTerminalPod(t, pod, "10.43.3.1")
	terminalIs(t, term, nbv1.TerminalRunning, nbv1.ReasonAgentReady)
	if got := running(); got != before+1 {
		t.Errorf("%v terminals running, want %v", got, before+1)
	}
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.Conditions = nil
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.TerminalContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	})
	terminalIs(t, term, nbv1.TerminalFailed, "OOMKilled")
	if got := running(); got != before {
		t.Errorf("%v terminals running after one failed, want %v", got, before)
	}
}
