package repository

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/scheme"
)

// A pod has its address before its agent listens. WaitReady asks the agent again after a
// growing pause, not at once: asking at once would spin on the refused connections, hundreds
// of asks per kernel, which many kernels starting together would pay for in CPU.
func TestWaitReady_PacesAsksOfAnAgentNotYetAnswering(t *testing.T) {
	// An address of its own on the loopback network, for the agent's fixed port.
	host := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(250), 1+rand.IntN(250))
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(agentapi.Port)))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", host, err)
	}
	var refused atomic.Int32
	// Set when WaitReady starts: the setup below can take a good part of 300 ms on a loaded
	// machine, which would leave room for only one ask.
	var answerAfter atomic.Int64
	answerAfter.Store(math.MaxInt64)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Now().UnixNano() < answerAfter.Load() {
			// Not up yet: the connection ends without an answer.
			refused.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		if r.Header.Get("Authorization") != "Bearer agent-token" || r.URL.Query().Get("wait") != "ready" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"execution_state":"idle","ready":true}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	kernel := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k1"}}
	kernel.Status.PodIP = host
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k1"},
		Data: map[string][]byte{agentapi.SecretKeyToken: []byte("agent-token")}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(kernel, secret).WithStatusSubresource(kernel).Build()
	if err := c.Status().Update(context.Background(), kernel); err != nil {
		t.Fatal(err)
	}

	k := &Kernels{Reader: c, Writer: c, Namespace: "ns", Agents: agentclient.New(), StartTimeout: 10 * time.Second}
	start := time.Now()
	answerAfter.Store(start.Add(300 * time.Millisecond).UnixNano())
	got, err := k.WaitReady(context.Background(), "k1")
	if err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if got.Name != "k1" {
		t.Errorf("WaitReady returned kernel %q", got.Name)
	}
	took := time.Since(start)
	// Pauses of 10, 20, 40, 80 and 160 ms: about six asks before the agent answers.
	if n := refused.Load(); n < 2 || n > 12 {
		t.Errorf("the agent was asked %d times in its first 300 ms; want a few, paced", n)
	}
	if took > 800*time.Millisecond {
		t.Errorf("WaitReady took %s after an agent that answers from 300 ms on", took)
	}
}
