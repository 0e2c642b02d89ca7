package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

func TestCullVerdict(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-24 * time.Hour))
	on := CullingOptions{IdleTimeout: time.Hour}
	report := func(state string, idle time.Duration, conns int) *agentapi.Status {
		return &agentapi.Status{ExecutionState: state, LastActivity: now.Add(-idle), Connections: conns, Ready: true}
	}
	unused := CullingOptions{UnusedTimeout: time.Hour}
	unusedFor := func(state string, d time.Duration) *agentapi.Status {
		return &agentapi.Status{ExecutionState: state, LastActivity: now.Add(-d), UnusedSince: ptr.To(now.Add(-d)), Ready: true}
	}
	failed := []metav1.Condition{{Type: nbv1.ConditionFailed, Status: metav1.ConditionTrue, Reason: "OOMKilled", Message: "container kernel exited with code 137"}}
	tests := []struct {
		name       string
		opts       CullingOptions
		conditions []metav1.Condition
		created    *metav1.Time
		claimed    time.Duration // ago; 0: not a claimed warm kernel
		report     *agentapi.Status
		wantReason nbv1.ConditionReason // "" when the kernel stays
		wantInMsg  string
	}{
		{name: "idle past the timeout", opts: on, report: report("idle", 2*time.Hour, 0),
			wantReason: nbv1.ReasonIdleTimeout, wantInMsg: "inactive for 2h0m0s, longer than its idle timeout of 1h0m0s (last activity 2026-03-04T10:00:00Z; idle, 0 connections)"},
		{name: "idle exactly the timeout stays", opts: on, report: report("idle", time.Hour, 0)},
		{name: "recently active stays", opts: on, report: report("idle", 59*time.Minute, 0)},
		{name: "culling off", opts: CullingOptions{}, report: report("idle", 48*time.Hour, 0)},
		{name: "culling off spares the dead too", opts: CullingOptions{}, conditions: failed},
		{name: "busy stays", opts: on, report: report("busy", 2*time.Hour, 0)},
		{name: "busy culled with cullBusy", opts: CullingOptions{IdleTimeout: time.Hour, CullBusy: true}, report: report("busy", 2*time.Hour, 0),
			wantReason: nbv1.ReasonIdleTimeout, wantInMsg: "busy, 0 connections"},
		{name: "connected stays", opts: on, report: report("idle", 2*time.Hour, 1)},
		{name: "connected culled with cullConnected", opts: CullingOptions{IdleTimeout: time.Hour, CullConnected: true}, report: report("idle", 2*time.Hour, 3),
			wantReason: nbv1.ReasonIdleTimeout, wantInMsg: "idle, 3 connections"},
		{name: "busy and connected needs both", opts: CullingOptions{IdleTimeout: time.Hour, CullBusy: true}, report: report("busy", 2*time.Hour, 1)},
		{name: "dead agent", opts: on, report: report("dead", 0, 2), wantReason: nbv1.ReasonKernelDead, wantInMsg: "reports it dead"},
		{name: "failed kernel without a report", opts: on, conditions: failed, wantReason: nbv1.ReasonKernelDead, wantInMsg: "dead (OOMKilled: container kernel exited with code 137)"},
		{name: "no report, nothing known", opts: on},
		{name: "no last activity counts from creation", opts: on, created: ptr.To(metav1.NewTime(now.Add(-30 * time.Minute))),
			report: &agentapi.Status{ExecutionState: "idle"}},
		{name: "no last activity, created long ago", opts: on, created: ptr.To(metav1.NewTime(now.Add(-90 * time.Minute))),
			report: &agentapi.Status{ExecutionState: "idle"}, wantReason: nbv1.ReasonIdleTimeout, wantInMsg: "inactive for 1h30m0s"},
		{name: "never used past the unused timeout, idle culling off", opts: unused, report: unusedFor("idle", 61*time.Minute),
			wantReason: nbv1.ReasonUnused, wantInMsg: "no client connected to the kernel in the 1h1m0s since its start (2026-03-04T10:59:00Z), longer than the unused timeout of 1h0m0s"},
		{name: "never used within the unused timeout stays", opts: unused, report: unusedFor("idle", 59*time.Minute)},
		{name: "never used but busy stays", opts: unused, report: unusedFor("busy", 3*time.Hour)},
		{name: "used once stays", opts: unused, report: report("idle", 3*time.Hour, 0)},
		{name: "unused timeout off", opts: on, report: unusedFor("idle", 50*time.Minute)},
		{name: "a warm kernel claimed recently stays, however long it waited", opts: on, claimed: 10 * time.Minute, report: report("idle", 5*time.Hour, 0)},
		{name: "a warm kernel idle since its claim", opts: on, claimed: 2 * time.Hour, report: report("idle", 5*time.Hour, 0),
			wantReason: nbv1.ReasonIdleTimeout, wantInMsg: "inactive for 2h0m0s"},
		{name: "a warm kernel claimed recently is not unused yet", opts: unused, claimed: 10 * time.Minute, report: unusedFor("idle", 5*time.Hour)},
		{name: "a warm kernel unused since its claim", opts: unused, claimed: 61 * time.Minute, report: unusedFor("idle", 5*time.Hour),
			wantReason: nbv1.ReasonUnused, wantInMsg: "in the 1h1m0s since its start (2026-03-04T10:59:00Z)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Status: nbv1.KernelStatus{Conditions: tc.conditions}}
			if tc.created != nil {
				k.CreationTimestamp = *tc.created
			}
			if tc.claimed != 0 {
				k.Annotations = map[string]string{nbv1.AnnotationClaimed: now.Add(-tc.claimed).Format(time.RFC3339)}
			}
			v, cull := cullVerdict(tc.opts, k, tc.report, now)
			if cull != (tc.wantReason != "") || v.reason != tc.wantReason {
				t.Fatalf("verdict %+v cull=%v, want reason %q", v, cull, tc.wantReason)
			}
			if !strings.Contains(v.message, tc.wantInMsg) {
				t.Errorf("message %q lacks %q", v.message, tc.wantInMsg)
			}
		})
	}
}

func TestCullingOptions_ASpecOverridesWhatItSets(t *testing.T) {
	operator := CullingOptions{IdleTimeout: time.Hour, Interval: time.Minute, CullConnected: true}
	tests := []struct {
		name string
		spec *nbv1.KernelCulling
		want CullingOptions
	}{
		{name: "no culling in the spec", spec: nil, want: operator},
		{name: "empty culling", spec: &nbv1.KernelCulling{}, want: operator},
		{name: "shorter timeout", spec: &nbv1.KernelCulling{IdleTimeout: &metav1.Duration{Duration: 10 * time.Minute}},
			want: CullingOptions{IdleTimeout: 10 * time.Minute, Interval: time.Minute, CullConnected: true}},
		{name: "off for this spec", spec: &nbv1.KernelCulling{IdleTimeout: &metav1.Duration{}},
			want: CullingOptions{Interval: time.Minute, CullConnected: true}},
		{name: "flags", spec: &nbv1.KernelCulling{CullConnected: ptr.To(false), CullBusy: ptr.To(true)},
			want: CullingOptions{IdleTimeout: time.Hour, Interval: time.Minute, CullBusy: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, operator.forSpec(tc.spec)); d != "" {
				t.Error(d)
			}
		})
	}
}
