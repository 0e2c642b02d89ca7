//go:build faults

package faults

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

var (
	agentBuild    sync.Once
	agentBuildErr error
)

// localBinaries builds nbkube and, beside it, the nbkube-agent that `nbkube local` runs in
// its kernel pods; it returns nbkube.
func localBinaries(t *testing.T) string {
	t.Helper()
	bin := nbkubeBinary(t)
	agentBuild.Do(func() { agentBuildErr = testenv.BuildCommands(binDir, agentapi.BinaryName) })
	if agentBuildErr != nil {
		t.Fatal(agentBuildErr)
	}
	return bin
}

// localStack is one `nbkube local` run as a process (testenv.StartLocal): a real control
// plane (etcd, kube-apiserver, kube-controller-manager as its children), the controllers,
// the Jupyter API and the local node, whose kernel pods are processes of this machine.
type localStack struct {
	*testenv.Local
	t      *testing.T
	client client.Client
	hc     *http.Client
}

// startLocal runs `nbkube local` with its own data directory, contents root and port, and
// waits until it is ready. Missing kernels (python3-ipykernel) stop the test as testenv.Missing
// says.
func startLocal(t *testing.T) *localStack {
	t.Helper()
	// nbkube local offers the first of these that has ipykernel.
	if exec.Command("python3", "-c", "import ipykernel").Run() != nil && exec.Command("/usr/bin/python3", "-c", "import ipykernel").Run() != nil {
		testenv.Missing(t, "python3 with ipykernel is not installed (hack/install-test-deps.sh)")
	}
	bin := localBinaries(t)
	dir := t.TempDir()
	dataDir, root := filepath.Join(dir, "data"), filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tok := make([]byte, 24)
	_, _ = rand.Read(tok)
	l := testenv.StartLocal(t, testenv.LocalConfig{Bin: bin, DataDir: dataDir, Root: root,
		Args: []string{"--listen", testenv.FreeAddr(t), "--token", hex.EncodeToString(tok)}})
	s := &localStack{Local: l, t: t, hc: &http.Client{Timeout: 2 * time.Minute}}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Bounded: the scenarios stop the control plane, and a read must not hang the test.
	cfg.Timeout = 20 * time.Second
	if s.client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		t.Fatal(err)
	}
	return s
}

// childNamed is the pid of nbkube local's descendant process whose command is name (etcd,
// kube-apiserver).
func (s *localStack) childNamed(name string) int {
	s.t.Helper()
	for _, p := range testenv.Descendants(s.PID()) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
		if err == nil && strings.TrimSpace(string(comm)) == name {
			return p
		}
	}
	s.t.Fatalf("no process %s under nbkube local (pid %d)", name, s.PID())
	return 0
}

// apiAnswer is an answer of the Jupyter API.
type apiAnswer struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

// call sends a request to the Jupyter API with the token; err is a failure to get an answer.
func (s *localStack) call(hc *http.Client, method, route string, body any) (apiAnswer, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return apiAnswer{}, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.URL+route, r)
	if err != nil {
		return apiAnswer{}, err
	}
	req.Header.Set("Authorization", "token "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return apiAnswer{took: time.Since(began)}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return apiAnswer{status: resp.StatusCode, header: resp.Header, body: data, took: time.Since(began)}, err
}

// startKernel starts a python3 kernel through POST /api/kernels and returns its id.
func (s *localStack) startKernel() string {
	s.t.Helper()
	a, err := s.call(s.hc, http.MethodPost, "api/kernels", map[string]string{"name": "python3"})
	if err != nil || a.status != http.StatusCreated {
		s.t.Fatalf("POST /api/kernels: %d %s (%v)", a.status, a.body, err)
	}
	var k struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(a.body, &k); err != nil || k.ID == "" {
		s.t.Fatalf("POST /api/kernels: %s (%v)", a.body, err)
	}
	return k.ID
}

// kernelState is GET /api/kernels/<id>'s execution_state, or the status when it is not 200.
func (s *localStack) kernelState(id string) string {
	s.t.Helper()
	a, err := s.call(&http.Client{Timeout: 10 * time.Second}, http.MethodGet, "api/kernels/"+id, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	if a.status != http.StatusOK {
		return fmt.Sprintf("HTTP %d", a.status)
	}
	var k struct {
		State string `json:"execution_state"`
	}
	_ = json.Unmarshal(a.body, &k)
	return k.State
}

// openChannels opens the kernel's channels; the test fails if it cannot.
func (s *localStack) openChannels(id string) *jpclient.Conn {
	s.t.Helper()
	c, err := s.tryChannels(id)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// tryChannels opens the kernel's channels with a session of its own, as JupyterLab does,
// reading ahead so that a wait can time out; it is closed when the test ends.
func (s *localStack) tryChannels(id string) (*jpclient.Conn, error) {
	c, err := jpclient.DialKernel(s.URL, id, jpclient.Options{Token: s.Token, SessionID: jpclient.NewID(), Username: "faults",
		ReadAhead: 4096, BadFrame: func(err error) { s.t.Errorf("%v", err) }})
	if err != nil {
		return nil, err
	}
	s.t.Cleanup(c.Close)
	return c, nil
}
