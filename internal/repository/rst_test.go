package repository

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/scheme"
)

// The renderer is called with the token derived from the installation's key, as the manager
// wrote it into the renderer's Secret, which the API server does not read.
func TestRenderRST_CallsTheRendererWithTheDerivedToken(t *testing.T) {
	// An address of its own on the loopback network, for the agent's fixed port.
	host := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(250), 1+rand.IntN(250))
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(agentapi.Port)))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", host, err)
	}
	want := agenttoken.RSTRenderer(testAgentTokenKey, "ns")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != agentapi.AuthScheme+" "+want {
			http.Error(w, "wrong token", http.StatusUnauthorized)
			return
		}
		src, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte("<p>"), append(src, "</p>"...)...))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "renderer-1", Labels: builder.RSTRendererLabels()},
		Status: corev1.PodStatus{PodIP: host, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pod).Build()
	r := &RSTRenderers{Reader: noSecrets{c}, Namespace: "ns", Agents: agentclient.New(), AgentTokenKey: testAgentTokenKey}
	html, err := r.RenderRST(t.Context(), []byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if string(html) != "<p>hi</p>" {
		t.Errorf("RenderRST = %q", html)
	}
}
