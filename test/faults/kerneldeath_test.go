//go:build faults

package faults

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

const (
	// restartingBound is how soon after its process is killed a client must be told that
	// the kernel restarts.
	restartingBound = 5 * time.Second
	// answerBound is how soon a killed or deleted kernel must answer again.
	answerBound = 60 * time.Second
)

// TestKernelDeath_KilledProcessAndDeletedPod kills -9 the ipykernel process of a kernel of
// `nbkube local` while a client holds its channels WebSocket, then deletes the kernel's pod.
//
// The kill: the client sees the status `restarting`, as Jupyter's restarter reports a kernel
// that died, then the kernel answers again on the same connection under the same id, without
// its variables; the Kernel's Restarted condition says KernelDied, by SIGKILL.
//
// The deletion: the kernel comes back in a new pod under the same id, as Jupyter restarts a
// kernel that died, so a client's kernel id stays valid. Meanwhile the client's connection
// ends (there is no agent left to talk to: JupyterLab then reconnects), GET /api/kernels/<id>
// reports the kernel not idle (dead, then starting) until the new pod answers and never 404,
// and the Kernel's Restarted condition says PodDeleted.
func TestKernelDeath_KilledProcessAndDeletedPod(t *testing.T) {
	s := startLocal(t)
	id := s.startKernel()
	ch := s.openChannels(id)
	pid := kernelPID(t, ch)
	if e, err := ch.Execute("x = 1", time.Minute, nil); err != nil || e.Status() != "ok" {
		t.Fatalf("x = 1: %+v %v", e, err)
	}
	// The process the kernel names is ipykernel, run under nbkube local by the kernel pod's
	// agent or forked by the node's kernel fork server (docs/local.md).
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !slices.Contains(testenv.Descendants(s.PID()), pid) || !strings.Contains(string(cmdline), "ipykernel") && !strings.Contains(string(cmdline), "forkserver.py") {
		t.Fatalf("process %d (%q) is not an ipykernel below nbkube local", pid, cmdline)
	}

	// (a) kill -9 of the kernel process.
	killedAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var states []string
	toRestarting := time.Duration(0)
	watch := func(m *jpclient.Msg) {
		if st := m.ExecutionState(); st != "" {
			states = append(states, st)
			if st == "restarting" && toRestarting == 0 {
				toRestarting = m.At.Sub(killedAt)
			}
		}
	}
	deadline := time.Now().Add(restartingBound)
	for toRestarting == 0 {
		m, err := ch.Next(deadline)
		switch {
		case errors.Is(err, jpclient.ErrTimeout):
			t.Fatalf("no status restarting within %s of the kill; states seen %v", restartingBound, states)
		case err != nil:
			t.Fatalf("after the kill: %v; states seen %v", err, states)
		}
		watch(m)
	}
	// What the client sends meanwhile waits for the new kernel process.
	e, err := ch.Execute("import os; os.getpid()", answerBound, watch)
	toAnswer := time.Since(killedAt)
	if err != nil {
		t.Fatalf("the kernel did not answer after the kill: %v; states seen %v", err, states)
	}
	if newPID, _ := strconv.Atoi(e.Result); newPID == 0 || newPID == pid {
		t.Errorf("after the kill the kernel is process %q, before it was %d", e.Result, pid)
	}
	if e, err := ch.Execute("x", answerBound, nil); err != nil || e.Status() != "error" {
		t.Errorf("x after the kernel died: %+v (%v), want a NameError", e, err)
	}
	if st := s.kernelState(id); st != "idle" {
		t.Errorf("GET /api/kernels/%s after the restart: %s, want idle", id, st)
	}
	k := &nbv1.Kernel{}
	testenv.Eventually(t, "the Kernel says its process died", 30*time.Second, func() error {
		if err := s.client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: id}, k); err != nil {
			return err
		}
		c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionRestarted)
		if c == nil || c.Reason != string(nbv1.ReasonKernelDied) || !strings.Contains(c.Message, "SIGKILL") || k.Status.RestartCount != 1 {
			return fmt.Errorf("restartCount %d, condition %+v", k.Status.RestartCount, c)
		}
		return nil
	})
	t.Logf("kill -9: the client saw %v; Restarted: %s", states, meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionRestarted).Message)

	// (b) deletion of the kernel's pod.
	pod := &corev1.Pod{}
	if err := s.client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: id}, pod); err != nil {
		t.Fatal(err)
	}
	deletedAt := time.Now()
	if err := s.client.Delete(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	// The API's view, polled as JupyterLab does while its connection is down.
	var apiStates []string
	pollDone := make(chan struct{})
	stopPoll := make(chan struct{})
	go func() {
		defer close(pollDone)
		for {
			st := s.kernelState(id)
			if len(apiStates) == 0 || apiStates[len(apiStates)-1] != st {
				apiStates = append(apiStates, st)
			}
			select {
			case <-stopPoll:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	var wsStates []string
	toClosed := time.Duration(0)
	closeDeadline := time.Now().Add(answerBound)
	for toClosed == 0 {
		m, err := ch.Next(closeDeadline)
		switch {
		case errors.Is(err, jpclient.ErrEnded):
			toClosed = time.Since(deletedAt)
		case err != nil:
			t.Fatalf("the client's connection still open %s after its kernel's pod was deleted", answerBound)
		default:
			if st := m.ExecutionState(); st != "" {
				wsStates = append(wsStates, st)
			}
		}
	}
	// The client reconnects, as JupyterLab does, until the kernel in its new pod answers.
	var again *jpclient.Conn
	var toAnswerAgain time.Duration
	testenv.Eventually(t, "the kernel answering again in a new pod", answerBound, func() error {
		if st := s.kernelState(id); st != "idle" && st != "busy" {
			return fmt.Errorf("execution_state %s", st)
		}
		c, err := s.tryChannels(id)
		if err != nil {
			return err
		}
		e, err := c.Execute("x", 10*time.Second, nil)
		if err != nil {
			c.Close()
			return err
		}
		if e.Status() != "error" {
			t.Errorf("x in the new pod: %+v, want a NameError: the old kernel's variables cannot survive its pod", e)
		}
		again, toAnswerAgain = c, time.Since(deletedAt)
		return nil
	})
	close(stopPoll)
	<-pollDone
	if e, err := again.Execute("1+1", 10*time.Second, nil); err != nil || e.Result != "2" {
		t.Errorf("1+1 in the new pod: %+v (%v)", e, err)
	}
	if slices.ContainsFunc(apiStates, func(st string) bool { return strings.HasPrefix(st, "HTTP") }) {
		t.Errorf("GET /api/kernels/%s failed while the pod was replaced: %v", id, apiStates)
	}
	if !slices.ContainsFunc(apiStates, func(st string) bool { return st == "dead" || st == "starting" || st == "restarting" }) {
		t.Errorf("GET /api/kernels/%s never said the kernel was not running: %v", id, apiStates)
	}
	testenv.Eventually(t, "the Kernel says its pod was deleted", 30*time.Second, func() error {
		if err := s.client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: id}, k); err != nil {
			return err
		}
		c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionRestarted)
		if c == nil || c.Reason != string(nbv1.ReasonPodDeleted) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	now := &corev1.Pod{}
	if err := s.client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: id}, now); err != nil || now.UID == pod.UID {
		t.Errorf("no new pod for kernel %s (%v)", id, err)
	}
	t.Logf("pod deleted: the connection ended after %v (states on it %v); GET said %v; Restarted: %s",
		toClosed.Round(time.Millisecond), wsStates, apiStates, meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionRestarted).Message)

	figure(t, "kernel-death", "kill_to_restarting", toRestarting.Round(time.Millisecond),
		"kill_to_answer", toAnswer.Round(time.Millisecond), "delete_to_closed", toClosed.Round(time.Millisecond),
		"delete_to_answer", toAnswerAgain.Round(time.Millisecond), "api_states", strings.Join(apiStates, ","))
}

// kernelPID is the kernel's process id, as the kernel itself tells.
func kernelPID(t *testing.T, ch *jpclient.Conn) int {
	t.Helper()
	pid, err := ch.KernelPID(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
