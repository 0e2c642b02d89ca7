package repository

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

// startEnv is a namespace of a real kube-apiserver with a python3 KernelSpec and one whose
// Jupyter name, "sample 2", cannot be a resource name, where playCluster plays the
// controllers; kernels and sessions start there as far as the resources go.
func startEnv(t *testing.T) (client.Client, string, *Kernels) {
	t.Helper()
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	argv := []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}
	python3 := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "python3"},
		Spec: nbv1.KernelSpecSpec{DisplayName: "Python 3", Language: "python", Argv: argv}}
	sample := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sample-2"},
		Spec: nbv1.KernelSpecSpec{KernelName: "sample 2", DisplayName: "Sample 2", Language: "python", Argv: argv}}
	for _, ks := range []*nbv1.KernelSpec{python3, sample} {
		if err := c.Create(t.Context(), ks); err != nil {
			t.Fatal(err)
		}
	}
	playCluster(t, c, ns)
	return c, ns, &Kernels{Reader: c, Writer: c, Namespace: ns, StartTimeout: 30 * time.Second,
		Specs: &KernelSpecs{Reader: c, Namespace: ns}}
}

// playCluster plays the controllers for the kernels and sessions of ns until the test ends,
// as far as the API server sees them, as the envtest suite plays the kubelet: it makes the
// kernel a session asks for, as the Session controller does, and calls every kernel Ready, as
// the Kernel controller does once the kernel answers. No pod or kernel process runs.
func playCluster(t *testing.T, c client.Client, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var sessions nbv1.SessionList
			if err := c.List(ctx, &sessions, client.InNamespace(ns)); err == nil {
				for i := range sessions.Items {
					s := &sessions.Items[i]
					if s.Spec.Kernel.KernelSpec != "" {
						_ = c.Create(ctx, &nbv1.Kernel{
							ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sessionKernel(s)},
							Spec:       nbv1.KernelParameters{Owner: s.Spec.Owner, KernelSpec: s.Spec.Kernel.KernelSpec},
						})
					}
				}
			}
			var kernels nbv1.KernelList
			if err := c.List(ctx, &kernels, client.InNamespace(ns)); err == nil {
				for i := range kernels.Items {
					kn := &kernels.Items[i]
					if meta.SetStatusCondition(&kn.Status.Conditions, metav1.Condition{Type: nbv1.ConditionReady,
						Status: metav1.ConditionTrue, Reason: "Played", Message: "the test plays the kernel controller"}) {
						_ = c.Status().Update(ctx, kn)
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

// Jupyter's kernel model calls a kernel by the name of its spec in Jupyter's API, which a
// Kernel resource, naming its KernelSpec by resource name, does not have; and
// jupyter_client's KernelManager starts "python" as python3.
func TestStartKernel_NamesKernelsAsJupyterDoes(t *testing.T) {
	c, ns, k := startEnv(t)
	u := identity.User{Name: "alice"}
	for _, tc := range []struct{ asked, resource, name string }{
		{asked: "python", resource: "python3", name: "python3"},
		{asked: "Sample 2", resource: "sample-2", name: "sample 2"},
	} {
		m, err := k.StartKernel(t.Context(), u, KernelStart{Name: tc.asked})
		if err != nil {
			t.Fatalf("start %q: %v", tc.asked, err)
		}
		kn := &nbv1.Kernel{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: m.ID}, kn); err != nil {
			t.Fatal(err)
		}
		if m.Name != tc.name || kn.Spec.KernelSpec != tc.resource {
			t.Errorf("start %q: kernel called %q of KernelSpec %q, want %q of %q", tc.asked, m.Name, kn.Spec.KernelSpec, tc.name, tc.resource)
		}
		if got, err := k.GetKernel(t.Context(), u, m.ID); err != nil || got.Name != tc.name {
			t.Errorf("get the %q kernel: %+v, %v", tc.asked, got, err)
		}
	}
	// The list's order is the store's (names are random): compare the set of names.
	list, err := k.ListKernels(t.Context(), u)
	names := make([]string, 0, len(list))
	for _, m := range list {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"python3", "sample 2"}) {
		t.Errorf("list: %+v, %v", list, err)
	}

	// A resource's name is no name of its spec; without a python3 spec, "python" is none.
	none := &Kernels{Reader: c, Writer: c, Namespace: ns, Specs: &KernelSpecs{Reader: c, Namespace: testenv.Namespace(t, c)}}
	for _, tc := range []struct {
		k             *Kernels
		asked, answer string
	}{{k, "sample-2", "No such kernel named sample-2"}, {none, "python", "No such kernel named python3"}} {
		if _, err := tc.k.StartKernel(t.Context(), u, KernelStart{Name: tc.asked}); !errors.Is(err, domainerr.ErrNotFound) || err.Error() != tc.answer {
			t.Errorf("start %q: %v, want %q", tc.asked, err, tc.answer)
		}
	}
}

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
		if r.Header.Get("Authorization") != "Bearer "+testAgentToken || r.URL.Query().Get("wait") != "ready" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"execution_state":"idle","ready":true}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c := runningKernel(t, host)
	k := &Kernels{Reader: noSecrets{c}, Writer: c, Namespace: "ns", Agents: agentclient.New(), StartTimeout: 10 * time.Second,
		AgentTokenKey: testAgentTokenKey}
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

// testAgentTokenKey is the agent token key of the tests' installation, and testAgentToken the
// token of the kernel runningKernel makes.
var (
	testAgentTokenKey = []byte("0123456789abcdef0123456789abcdef")
	testAgentToken    = agenttoken.Kernel(testAgentTokenKey, "ns", "k1", "uid-k1")
)

// runningKernel is a client that holds the kernel ns/k1, running at podIP, and no Secret.
func runningKernel(t *testing.T, podIP string) client.Client {
	t.Helper()
	kernel := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k1", UID: "uid-k1"}}
	kernel.Status.PodIP = podIP
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(kernel).WithStatusSubresource(kernel).Build()
	if err := c.Status().Update(t.Context(), kernel); err != nil {
		t.Fatal(err)
	}
	return c
}

// noSecrets is a reader that may not read Secrets, as the API server's role does not.
type noSecrets struct{ client.Reader }

func (r noSecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		return apierrors.NewForbidden(corev1.Resource("secrets"), key.Name, errors.New("the API server reads no secrets"))
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r noSecrets) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.SecretList); ok {
		return apierrors.NewForbidden(corev1.Resource("secrets"), "", errors.New("the API server reads no secrets"))
	}
	return r.Reader.List(ctx, list, opts...)
}

// A kernel's endpoint carries the token derived from the installation's key and the kernel's
// identity, the one the manager wrote into the kernel's Secret, without reading the Secret.
func TestEndpoint_DerivesTheAgentTokenWithoutReadingSecrets(t *testing.T) {
	c := runningKernel(t, "10.0.0.7")
	k := &Kernels{Reader: noSecrets{c}, Writer: c, Namespace: "ns", AgentTokenKey: testAgentTokenKey}
	e, err := k.Endpoint(t.Context(), identity.User{Name: "admin", Admin: true}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	want := agentclient.Endpoint{Host: "10.0.0.7", Port: agentapi.Port, Token: testAgentToken}
	if e != want {
		t.Errorf("Endpoint = %+v, want %+v", e, want)
	}
}

// A kernel without a pod address (starting, or a dead kernel's new pod coming) is a
// conflict for what needs its agent, as restarting a starting kernel is; a failed one says
// why, with the reason of its Failed condition.
func TestEndpoint_OfAKernelWithoutAPod(t *testing.T) {
	c := runningKernel(t, "")
	k := &Kernels{Reader: c, Writer: c, Namespace: "ns", AgentTokenKey: testAgentTokenKey}
	admin := identity.User{Name: "admin", Admin: true}
	_, err := k.Endpoint(t.Context(), admin, "k1")
	var de *domainerr.Error
	if !errors.Is(err, domainerr.ErrConflict) {
		t.Errorf("Endpoint of a starting kernel: %v, want a conflict", err)
	}

	kernel := &nbv1.Kernel{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "k1"}, kernel); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&kernel.Status.Conditions, metav1.Condition{Type: nbv1.ConditionFailed, Status: metav1.ConditionTrue,
		Reason: "ImagePullBackOff", Message: "the kernel's image cannot be pulled"})
	if err := c.Status().Update(t.Context(), kernel); err != nil {
		t.Fatal(err)
	}
	_, err = k.Endpoint(t.Context(), admin, "k1")
	if !errors.Is(err, domainerr.ErrStartFailed) || !errors.As(err, &de) || de.Reason != "ImagePullBackOff" || !strings.Contains(de.Message, "cannot be pulled") {
		t.Errorf("Endpoint of a failed kernel: %#v, want its failure", err)
	}
}

// With homes, a kernel mounts its owner's home, made before the kernel exists; an admin's own
// kernel mounts the whole volume, and one an admin starts for a user, that user's home. The
// CRD refuses homes that could leave the volume, and changes of home.
func TestStartKernel_MountsTheOwnersHome(t *testing.T) {
	c, ns, k := startEnv(t)
	var made []string
	var err error
	if k.Homes, err = homes.Parse("users/{username}"); err != nil {
		t.Fatal(err)
	}
	k.MakeHome = func(h string) error { made = append(made, h); return nil }
	ann, root := identity.User{Name: "ann"}, identity.User{Name: "root", Admin: true}
	for _, tc := range []struct {
		u     identity.User
		owner string
		home  string
	}{{ann, "", "users/ann"}, {root, "", nbv1.HomeWholeVolume}, {root, "ann", "users/ann"}} {
		m, err := k.StartKernel(t.Context(), tc.u, KernelStart{Name: "python3", Owner: tc.owner})
		if err != nil {
			t.Fatal(err)
		}
		var kn nbv1.Kernel
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: m.ID}, &kn); err != nil {
			t.Fatal(err)
		}
		if kn.Spec.Home != tc.home {
			t.Errorf("%s's kernel for %q has home %q, want %q", tc.u.Name, tc.owner, kn.Spec.Home, tc.home)
		}
	}
	if want := []string{"users/ann", "users/ann"}; !slices.Equal(made, want) {
		t.Errorf("homes made: %v, want %v", made, want)
	}

	s := &Sessions{Reader: c, Writer: c, Namespace: ns, Kernels: k}
	p, spec := "dir/a.ipynb", "python3"
	m, _, err := s.CreateSession(t.Context(), ann, SessionChange{Path: &p, KernelSpec: &spec})
	if err != nil {
		t.Fatal(err)
	}
	var se nbv1.Session
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: m.ID}, &se); err != nil || se.Spec.Kernel.Home != "users/ann" {
		t.Errorf("ann's session starts a kernel with home %q (%v)", se.Spec.Kernel.Home, err)
	}

	for _, bad := range []string{"../x", "/x", "a/../b", "a//b", ".nbkube", "a/.hidden"} {
		kn := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"},
			Spec: nbv1.KernelParameters{Owner: "ann", KernelSpec: "python3", Home: bad}}
		if err := c.Create(t.Context(), kn); err == nil {
			t.Errorf("a Kernel with home %q was accepted", bad)
		}
	}
	kn := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "homed"},
		Spec: nbv1.KernelParameters{Owner: "ann", KernelSpec: "python3", Home: "users/ann"}}
	if err := c.Create(t.Context(), kn); err != nil {
		t.Fatal(err)
	}
	for _, home := range []string{"users/ben", ""} {
		kn.Spec.Home = home
		if err := c.Update(t.Context(), kn); err == nil {
			t.Errorf("a Kernel's home changed to %q", home)
		}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(kn), kn); err != nil {
			t.Fatal(err)
		}
	}
}
