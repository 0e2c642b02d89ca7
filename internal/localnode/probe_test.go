package localnode

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestProber_ReportsResultChangesAfterThresholds(t *testing.T) {
	defer goleak.VerifyNone(t)
	statuses := []int{500, 200, 200, 500, 500}
	hits := make(chan int, len(statuses))
	var mu sync.Mutex
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		code := statuses[min(served, len(statuses)-1)]
		served++
		mu.Unlock()
		w.WriteHeader(code)
		hits <- code
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portNum, _ := strconv.Atoi(port)

	clk := clocktesting.NewFakeClock(time.Now())
	reports := make(chan bool, len(statuses))
	var unhealthy []string
	p := &prober{
		kind: probeReadiness,
		probe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
			PeriodSeconds:    1,
			FailureThreshold: 2,
		},
		container: &corev1.Container{Name: "web", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(portNum)}}},
		podIP:     "127.0.0.1",
		clock:     clk,
		unhealthy: func(msg string) { unhealthy = append(unhealthy, msg) },
		report:    func(ok bool) bool { reports <- ok; return true },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()

	var got []bool
	for range statuses {
		<-hits
		clk.Step(time.Second)
	}
	for len(got) < 2 {
		got = append(got, <-reports)
	}
	cancel()
	<-done
	if diff := cmp.Diff([]bool{true, false}, got); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	if len(unhealthy) < 3 || !strings.HasPrefix(unhealthy[0], "Readiness probe failed: HTTP probe failed with statuscode: 500") {
		t.Errorf("unhealthy events = %q", unhealthy)
	}
}

func TestProber_ProbeOnceJudgesHTTPTCPAndExec(t *testing.T) {
	defer goleak.VerifyNone(t)
	var gotHeader, gotUA, gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			gotHeader, gotUA, gotQuery = r.Header.Get("X-Probe"), r.UserAgent(), r.URL.RawQuery
		case "/missing":
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	execProbeOf := func(script string) *execProbe {
		return &execProbe{cmd: hostCommand{path: sh, argv: []string{sh, "-c", script}, dir: t.TempDir()}}
	}

	tests := []struct {
		name    string
		handler corev1.ProbeHandler
		exec    *execProbe
		timeout int32
		wantErr string
	}{
		{name: "http success with headers", handler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz?deep=1", Port: intstr.FromInt32(int32(port)), HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}}},
		{name: "http 404", handler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/missing", Port: intstr.FromInt32(int32(port))}},
			wantErr: "HTTP probe failed with statuscode: 404"},
		{name: "tcp open", handler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}},
		{name: "tcp closed", handler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(closedPort))}},
			wantErr: "connection refused"},
		{name: "unknown port name", handler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("nope")}},
			wantErr: `no port named "nope"`},
		{name: "exec success", handler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}, exec: execProbeOf("exit 0")},
		{name: "exec failure", handler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}, exec: execProbeOf("echo not yet; exit 1"),
			wantErr: "exit status 1: not yet"},
		{name: "exec timeout", handler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}, exec: execProbeOf("sleep 5"), timeout: 1,
			wantErr: "timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &prober{
				probe:     &corev1.Probe{ProbeHandler: tt.handler, TimeoutSeconds: tt.timeout},
				container: &corev1.Container{Name: "web"},
				podIP:     host,
				exec:      tt.exec,
			}
			err := p.probeOnce(context.Background())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("probe failed: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if gotHeader != "yes" || gotUA != probeUserAgent || gotQuery != "deep=1" {
		t.Errorf("the server saw X-Probe=%q User-Agent=%q query=%q", gotHeader, gotUA, gotQuery)
	}
}
