//go:build faults

package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

const (
	// controlPlaneStop is how long etcd and kube-apiserver stay stopped: issue 24's 30 s.
	controlPlaneStop = 30 * time.Second
	// refusalBound is how soon a start must be refused while the control plane is away: a
	// client must not hang.
	refusalBound = 10 * time.Second
	// recoveryBound is how soon after the control plane is back a start must succeed.
	recoveryBound = 60 * time.Second
	// cellBound is how long a cell (x += 1) may take while the control plane is away.
	cellBound = 10 * time.Second
)

// refusal is one answer to POST /api/kernels while the control plane was stopped.
type refusal struct {
	status     int
	took       time.Duration
	message    string
	reason     *string
	retryAfter string
	err        error
}

// TestControlPlane_StoppedFor30sKernelsRunAndStartsAre503 stops (SIGSTOP) the etcd and
// kube-apiserver of `nbkube local`, run as a process, for 30 s. Meanwhile a running kernel
// keeps executing cells through its open WebSocket, every one answered, and every
// POST /api/kernels is refused within refusalBound with 503, Jupyter's JSON error with a reason
// and a Retry-After, never left hanging. Once they are continued (SIGCONT), a new start
// succeeds within recoveryBound, the old kernel still holds its variables, and no kernel is
// left of the refused starts.
func TestControlPlane_StoppedFor30sKernelsRunAndStartsAre503(t *testing.T) {
	s := startLocal(t)
	id := s.startKernel()
	ch := s.openChannels(id)
	if e, err := ch.Execute("x = 41", time.Minute, nil); err != nil || e.Status() != "ok" {
		t.Fatalf("x = 41: %+v %v", e, err)
	}

	stopped := []int{s.childNamed("etcd"), s.childNamed("kube-apiserver")}
	resume := func() {
		// etcd first: kube-apiserver's first requests go to it.
		for _, p := range stopped {
			_ = syscall.Kill(p, syscall.SIGCONT)
		}
	}
	// Runs before nbkube local is stopped (testenv.StartLocal's cleanup), even when the test
	// fails half-way.
	t.Cleanup(resume)
	for _, p := range stopped {
		if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stoppedAt := time.Now()

	// Starts, one after the other, until the last one could still take refusalBound.
	refusals := make(chan []refusal, 1)
	go func() {
		var out []refusal
		hc := &http.Client{Timeout: 3 * refusalBound}
		for time.Since(stoppedAt) < controlPlaneStop-refusalBound {
			a, err := s.call(hc, http.MethodPost, "api/kernels", map[string]string{"name": "python3"})
			r := refusal{status: a.status, took: a.took, retryAfter: a.header.Get("Retry-After"), err: err}
			var body struct {
				Message *string `json:"message"`
				Reason  *string `json:"reason"`
			}
			if err == nil {
				if jerr := json.Unmarshal(a.body, &body); jerr != nil || body.Message == nil {
					r.err = errors.Join(fmt.Errorf("not Jupyter's JSON error: %.300q", a.body), jerr)
				} else {
					r.message, r.reason = *body.Message, body.Reason
				}
			}
			out = append(out, r)
			time.Sleep(time.Second)
		}
		refusals <- out
	}()

	// Cells on the open WebSocket, as fast as they answer, for as long as the control
	// plane is stopped.
	cells, lists := 0, 0
	var slowest, slowestList time.Duration
	for time.Since(stoppedAt) < controlPlaneStop {
		began := time.Now()
		e, err := ch.Execute("x += 1; x", cellBound, nil)
		took := time.Since(began)
		if err != nil {
			t.Fatalf("cell %d, %s after the control plane stopped: %v", cells+1, time.Since(stoppedAt).Round(time.Millisecond), err)
		}
		if want := strconv.Itoa(42 + cells); e.Status() != "ok" || e.Result != want {
			t.Fatalf("cell %d: %+v, want %s", cells+1, e, want)
		}
		cells++
		slowest = max(slowest, took)
		if cells%20 == 1 {
			// JupyterLab polls the list of kernels: it answers from the cache.
			a, err := s.call(&http.Client{Timeout: cellBound}, http.MethodGet, "api/kernels", nil)
			if err != nil || a.status != http.StatusOK || !strings.Contains(string(a.body), id) {
				t.Errorf("GET /api/kernels with the control plane stopped: %d %.200s (%v)", a.status, a.body, err)
			}
			lists++
			slowestList = max(slowestList, a.took)
		}
		time.Sleep(100 * time.Millisecond)
	}

	got := <-refusals
	var slowestRefusal time.Duration
	for i, r := range got {
		slowestRefusal = max(slowestRefusal, r.took)
		switch {
		case r.err != nil:
			t.Errorf("start %d while the control plane was stopped: %v (after %s)", i+1, r.err, r.took.Round(time.Millisecond))
		case r.status != http.StatusServiceUnavailable:
			t.Errorf("start %d: HTTP %d %q, want 503", i+1, r.status, r.message)
		case r.message == "" || r.reason == nil || *r.reason == "":
			t.Errorf("start %d: 503 with message %q and reason %v: want both", i+1, r.message, r.reason)
		case r.retryAfter == "":
			t.Errorf("start %d: 503 without Retry-After", i+1)
		case r.took > refusalBound:
			t.Errorf("start %d refused after %s, more than %s", i+1, r.took.Round(time.Millisecond), refusalBound)
		}
	}
	if len(got) < 3 {
		t.Errorf("only %d starts tried while the control plane was stopped", len(got))
	}
	if len(got) > 0 && got[0].reason != nil {
		t.Logf("refusal: 503 %q, reason %q, Retry-After %s", got[0].message, *got[0].reason, got[0].retryAfter)
	}

	resume()
	resumedAt := time.Now()
	var newID string
	attempts := 0
	for newID == "" {
		if time.Since(resumedAt) > recoveryBound {
			t.Fatalf("no kernel started within %s of the control plane's return (%d attempts)", recoveryBound, attempts)
		}
		attempts++
		a, err := s.call(s.hc, http.MethodPost, "api/kernels", map[string]string{"name": "python3"})
		switch {
		case err == nil && a.status == http.StatusCreated:
			var k struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(a.body, &k); err != nil || k.ID == "" {
				t.Fatalf("POST /api/kernels: %s (%v)", a.body, err)
			}
			newID = k.ID
		case err == nil && a.status == http.StatusServiceUnavailable:
			// The control plane is still coming back: as a client told Retry-After would,
			// only sooner.
			time.Sleep(500 * time.Millisecond)
		default:
			t.Fatalf("POST /api/kernels after the control plane's return: %d %s (%v)", a.status, a.body, err)
		}
	}
	recovery := time.Since(resumedAt)

	if e, err := s.openChannels(newID).Execute("1+1", time.Minute, nil); err != nil || e.Result != "2" {
		t.Errorf("the kernel started after the return: 1+1 gave %+v (%v)", e, err)
	}
	if e, err := ch.Execute("x", cellBound, nil); err != nil || e.Result != strconv.Itoa(41+cells) {
		t.Errorf("the first kernel lost its variables: x = %+v (%v), want %d", e, err, 41+cells)
	}
	// A refused start leaves no kernel: one whose create landed late is deleted.
	testenv.Eventually(t, "only the two kernels started", 30*time.Second, func() error {
		var list nbv1.KernelList
		if err := s.client.List(t.Context(), &list, client.InNamespace("default")); err != nil {
			return err
		}
		var names []string
		for _, k := range list.Items {
			if k.DeletionTimestamp == nil {
				names = append(names, k.Name)
			}
		}
		slices.Sort(names)
		want := []string{id, newID}
		slices.Sort(want)
		if !slices.Equal(names, want) {
			return errors.New(fmt.Sprint("kernels ", names, ", want ", want))
		}
		return nil
	})

	figure(t, "control-plane-stopped", "stopped", controlPlaneStop, "cells", cells, "lists", lists, "slowest_list", slowestList.Round(time.Millisecond),
		"slowest_cell", slowest.Round(time.Millisecond), "starts_refused", len(got),
		"slowest_refusal", slowestRefusal.Round(time.Millisecond), "start_after_return", recovery.Round(time.Millisecond),
		"attempts_after_return", attempts)
}
