package repository

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

// TestStart_ControlPlaneThatDoesNotAnswerIs503Quickly starts a kernel and a session while
// the real kube-apiserver is cut off as a stopped process is (its connection accepts bytes
// and answers none): each start is refused with ErrUnavailable within APITimeout, not held
// for StartTimeout, and once the API server answers again no Kernel or Session is left of
// them, whether or not their held creates landed.
func TestStart_ControlPlaneThatDoesNotAnswerIs503Quickly(t *testing.T) {
	c, cfg := testenv.KubeClientConfig(t)
	ns := testenv.Namespace(t, c)
	argv := []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}
	if err := c.Create(t.Context(), &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "python3"},
		Spec: nbv1.KernelSpecSpec{DisplayName: "Python 3", Language: "python", Argv: argv}}); err != nil {
		t.Fatal(err)
	}
	k, sessions, pc, proxy := behindFreezableProxy(t, c, cfg, ns)

	proxy.freeze()
	u := identity.User{Name: "ann"}
	for _, start := range []struct {
		name string
		run  func() error
	}{
		{"kernel", func() error {
			_, err := k.StartKernel(t.Context(), u, KernelStart{Name: "python3"})
			return err
		}},
		{"session", func() error {
			p, spec := "a.ipynb", "python3"
			_, _, err := sessions.CreateSession(t.Context(), u, SessionChange{Path: &p, KernelSpec: &spec})
			return err
		}},
	} {
		refusedQuickly(t, start.name+" start", start.run)
	}
	proxy.thaw()

	testenv.Eventually(t, "nothing left of the refused starts", 20*time.Second, func() error {
		var kernels nbv1.KernelList
		var sessionList nbv1.SessionList
		if err := c.List(t.Context(), &kernels, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := c.List(t.Context(), &sessionList, client.InNamespace(ns)); err != nil {
			return err
		}
		if n := len(kernels.Items) + len(sessionList.Items); n > 0 {
			return fmt.Errorf("%d kernels and %d sessions", len(kernels.Items), len(sessionList.Items))
		}
		return nil
	})
	// And the same client starts again once the API server answers.
	if err := pc.Create(t.Context(), &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after"},
		Spec: nbv1.KernelParameters{Owner: "ann", KernelSpec: "python3"}}); err != nil {
		t.Errorf("create after the API server came back: %v", err)
	}
}

// apiTimeout is the repositories' APITimeout in the tests of a control plane that does not
// answer.
const apiTimeout = time.Second

// behindFreezableProxy is a kernel and a session repository whose writes go to the API server
// through a freezable proxy (pc), reading through c. The proxy's connection is open before
// the test freezes it, as a long-running server's is.
func behindFreezableProxy(t *testing.T, c client.Client, cfg *rest.Config, ns string) (*Kernels, *Sessions, client.Client, *freezableProxy) {
	t.Helper()
	proxy := startFreezableProxy(t, cfg)
	pc, err := client.New(proxy.config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	k := &Kernels{Reader: c, Writer: pc, Namespace: ns, StartTimeout: 30 * time.Second, APITimeout: apiTimeout,
		Specs: &KernelSpecs{Reader: c, Namespace: ns}}
	sessions := &Sessions{Reader: c, Writer: pc, Namespace: ns, Kernels: k}
	if err := pc.List(t.Context(), &nbv1.KernelList{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return k, sessions, pc, proxy
}

// refusedQuickly runs what, a request to the frozen API server, and checks that it is
// refused with ErrUnavailable within about apiTimeout.
func refusedQuickly(t *testing.T, what string, run func() error) {
	t.Helper()
	began := time.Now()
	err := run()
	took := time.Since(began)
	var de *domainerr.Error
	if !errors.As(err, &de) || !errors.Is(de, domainerr.ErrUnavailable) || de.Reason != ReasonControlPlaneUnavailable {
		t.Errorf("%s with the API server stopped: %v, want ErrUnavailable with reason %s", what, err, ReasonControlPlaneUnavailable)
	}
	if took > apiTimeout+2*time.Second {
		t.Errorf("%s refused after %s, want about %s", what, took, apiTimeout)
	}
}

// freezableProxy forwards TCP connections to the kube-apiserver and can freeze them: bytes
// are then taken and held, nothing goes through either way, as with a process stopped by
// SIGSTOP, whose kernel still accepts connections and buffers what it is sent.
type freezableProxy struct {
	config *rest.Config
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
}

func startFreezableProxy(t *testing.T, cfg *rest.Config) *freezableProxy {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezableProxy{config: rest.CopyConfig(cfg)}
	p.cond = sync.NewCond(&p.mu)
	p.config.Host = "https://" + l.Addr().String()
	// The serving certificate names the API server's host, not the proxy's address.
	p.config.ServerName = target.Hostname()
	var conns sync.WaitGroup
	var open []net.Conn
	var openMu sync.Mutex
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target.Host)
			if err != nil {
				in.Close()
				continue
			}
			openMu.Lock()
			open = append(open, in, out)
			openMu.Unlock()
			conns.Add(2)
			go p.pipe(&conns, out, in)
			go p.pipe(&conns, in, out)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		p.thaw()
		openMu.Lock()
		for _, c := range open {
			c.Close()
		}
		openMu.Unlock()
		conns.Wait()
	})
	return p
}

func (p *freezableProxy) pipe(wg *sync.WaitGroup, dst, src net.Conn) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			} else if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

func (p *freezableProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *freezableProxy) thaw() {
	p.mu.Lock()
	p.frozen = false
	p.cond.Broadcast()
	p.mu.Unlock()
}
