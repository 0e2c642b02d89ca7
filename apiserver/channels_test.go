package apiserver_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/nbkube/nbkube/agent"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
	"github.com/nbkube/nbkube/internal/wire"
)

// oneKernel serves a single kernel that runs in this process's agent. It stands in for the
// Kernel resources only: the claim of these tests is the proxy, between a real client and a
// real agent with a real ipykernel.
type oneKernel struct {
	id string
	ep agentclient.Endpoint
}

func (k *oneKernel) CountKernels(context.Context, apiserver.User) (int, int, error) { return 1, 0, nil }
func (k *oneKernel) ListKernels(context.Context, apiserver.User) ([]jupyter.Kernel, error) {
	return []jupyter.Kernel{{ID: k.id}}, nil
}
func (k *oneKernel) GetKernel(_ context.Context, _ apiserver.User, id string) (jupyter.Kernel, error) {
	return jupyter.Kernel{ID: id}, nil
}
func (k *oneKernel) StartKernel(context.Context, apiserver.User, repository.KernelStart) (jupyter.Kernel, error) {
	return jupyter.Kernel{ID: k.id}, nil
}
func (k *oneKernel) DeleteKernel(context.Context, apiserver.User, string) error       { return nil }
func (k *oneKernel) InterruptKernel(context.Context, apiserver.User, string) error    { return nil }
func (k *oneKernel) KernelOwner(_ context.Context, u apiserver.User, _ string) string { return u.Name }
func (k *oneKernel) RestartKernel(context.Context, apiserver.User, string) (jupyter.Kernel, error) {
	return jupyter.Kernel{ID: k.id}, nil
}
func (k *oneKernel) Endpoint(_ context.Context, _ apiserver.User, id string) (agentclient.Endpoint, error) {
	if id != k.id {
		return agentclient.Endpoint{}, domainerr.ErrNotFound
	}
	return k.ep, nil
}

// startAgent runs the agent with a real ipykernel and returns its endpoint once ready.
func startAgent(t *testing.T) agentclient.Endpoint {
	t.Helper()
	secret := t.TempDir()
	for name, v := range map[string]string{agentapi.SecretKeyHMAC: "k3y", agentapi.SecretKeyToken: "agent-token"} {
		if err := os.WriteFile(filepath.Join(secret, name), []byte(v), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Config{KernelID: "k1", Listen: "127.0.0.1:" + strconv.Itoa(port), SecretDir: secret,
			Argv: []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}, RuntimeDir: t.TempDir(), Log: logr.Discard()})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	ep := agentclient.Endpoint{Host: "127.0.0.1", Port: port, Token: "agent-token"}
	ac := agentclient.New()
	testenv.Eventually(t, "agent ready", 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := ac.WaitReady(ctx, ep)
		return err
	})
	return ep
}

func execute(t *testing.T, ws *websocket.Conn, v1 bool, code string) string {
	t.Helper()
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	header, _ := json.Marshal(map[string]string{"msg_id": id, "session": "s1", "username": "u", "msg_type": "execute_request", "version": "5.3"})
	content, _ := json.Marshal(map[string]any{"code": code, "silent": false})
	m := &wire.Message{Channel: wire.Shell, Header: header, ParentHeader: json.RawMessage("{}"), Metadata: json.RawMessage("{}"), Content: content}
	var err error
	if v1 {
		err = ws.WriteMessage(websocket.BinaryMessage, wire.EncodeV1(m))
	} else {
		data, _ := wire.EncodeJSON(m)
		err = ws.WriteMessage(websocket.TextMessage, data)
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	// The reply comes on shell, the result on iopub: the two channels are not ordered with
	// each other, so the call is done when both the reply and iopub's idle (which follows the
	// result) have come.
	result, replied, idle := "", false, false
	for !replied || !idle {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var got *wire.Message
		switch {
		case v1:
			got, err = wire.DecodeV1(data, wire.Limits{})
		case typ == websocket.BinaryMessage:
			got, err = wire.DecodeBinary(data, wire.Limits{})
		default:
			got, err = wire.DecodeJSON(data, wire.Limits{})
		}
		if err != nil {
			t.Fatal(err)
		}
		h, _ := wire.ParseHeader(got.Header)
		p, _ := wire.ParseHeader(got.ParentHeader)
		if p.MsgID != id {
			continue
		}
		switch h.MsgType {
		case "execute_result":
			var c struct {
				Data map[string]string `json:"data"`
			}
			_ = json.Unmarshal(got.Content, &c)
			result = c.Data["text/plain"]
		case "execute_reply":
			replied = true
		case "status":
			var c struct {
				State string `json:"execution_state"`
			}
			_ = json.Unmarshal(got.Content, &c)
			idle = idle || c.State == "idle"
		}
	}
	return result
}

func TestChannels_RelaysBothProtocolsAndLeavesNothingBehind(t *testing.T) {
	ep := startAgent(t)
	srv := newServer(t, func(o *apiserver.Options) { o.Kernels = &oneKernel{id: "k1", ep: ep} })
	// Whatever runs now (the agent, the servers) stays; what the connections start must go.
	before := goleak.IgnoreCurrent()
	base := "ws" + strings.TrimPrefix(srv.url, "http") + "/api/kernels/"
	ac := agentclient.New()
	for _, v1 := range []bool{false, true} {
		d := websocket.Dialer{}
		if v1 {
			d.Subprotocols = []string{wire.ProtocolV1}
		}
		ws, resp, err := d.Dial(base+"k1/channels?session_id=s1", http.Header{"Authorization": {"token " + testToken}})
		if err != nil {
			t.Fatalf("dial: %v %v", err, resp)
		}
		if got := ws.Subprotocol(); (got == wire.ProtocolV1) != v1 {
			t.Errorf("negotiated %q, v1 offered: %v", got, v1)
		}
		if got := execute(t, ws, v1, "6*7"); got != "42" {
			t.Errorf("v1=%v: 6*7 = %q", v1, got)
		}
		st, err := ac.Status(context.Background(), ep)
		if err != nil || st.Connections != 1 {
			t.Errorf("agent connections while connected: %v %v", st.Connections, err)
		}
		ws.Close()
		// The client's close reaches the agent.
		testenv.Eventually(t, "agent sees the client leave", 10*time.Second, func() error {
			st, err := ac.Status(context.Background(), ep)
			if err == nil && st.Connections != 0 {
				return errConnections(st.Connections)
			}
			return err
		})
	}

	goleak.VerifyNone(t, before,
		// Idle keep-alive connections of the HTTP clients, not of the proxy.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))

	// Unknown kernels and plain HTTP requests are refused before any upgrade.
	if _, resp, err := websocket.DefaultDialer.Dial(base+"nope/channels", http.Header{"Authorization": {"token " + testToken}}); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown kernel: %v", resp)
	}
	expect(t, srv.do(http.MethodGet, "/api/kernels/k1/channels", nil), http.StatusBadRequest)
	if _, resp, err := websocket.DefaultDialer.Dial(base+"k1/channels", nil); err == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("no token: %v", resp)
	}
}

type errConnections int

func (e errConnections) Error() string { return "still " + strconv.Itoa(int(e)) + " connections" }
