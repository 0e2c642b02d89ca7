package repository

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/quota"
)

// Terminals reads and writes the Terminal resources for the API server and talks to their
// agents: Jupyter's terminals, each a shell in a pod of its owner's that the Terminal
// controller makes. Users see and touch only their own terminals; admins all.
//
// A terminal's start answers once its resource exists, as Jupyter's answers once its shell
// is spawned; its pod comes after, and a connection to its WebSocket waits for it
// (TerminalEndpoint).
type Terminals struct {
	// Kernels holds what terminals share with kernels: the clients, the namespace, the
	// agents and their token key, the kernel specs whose images terminals run, the homes,
	// the users' ledger and the timeouts. Its StartTimeout bounds the wait of a connection
	// for a terminal's pod (DefaultTerminalStartTimeout when zero).
	Kernels *Kernels
	// APIReader, when set, reads around the cache: a terminal asked for by name that the
	// cache does not hold yet may have been made a moment ago through another replica (POST
	// answers at once, and a client connects right after, through any replica).
	APIReader client.Reader
}

// DefaultTerminalStartTimeout is how long a connection waits for a terminal's pod when the
// kernels' StartTimeout is unset.
const DefaultTerminalStartTimeout = 5 * time.Minute

// TerminalStart is what a terminal start asks for.
type TerminalStart struct {
	// Name is the terminal's name: when the user has a terminal of that name, it is the
	// answer. Empty for a new name (see newTerminalName).
	Name string
	// KernelSpec is the Jupyter name of the kernel spec whose image and resources the
	// terminal's pod takes.
	KernelSpec string
	// Cwd is the shell's working directory, relative to the owner's home, clean: the caller
	// has found it there.
	Cwd string
}

// terminalName is what a terminal's name may be: a DNS-1123 label of lowercase letters and
// digits, which is also one of Jupyter's names (\w+), in the URLs of both.
var terminalName = regexp.MustCompile(`^[a-z0-9]{1,63}$`)

// newTerminalName is a fresh terminal name: "t" and ten random lowercase letters and digits,
// some 52 bits, far beyond what two starts could share.
func newTerminalName() string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 11)
	_, _ = rand.Read(b)
	b[0] = 't'
	for i := 1; i < len(b); i++ {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}

// errTerminalNameTaken refuses a name that a terminal the user does not see has (another
// user's, or one being deleted), without telling whose.
func errTerminalNameTaken(name string) error {
	return domainerr.Conflict("The terminal name %s is not available: choose another, or leave the name out for a new one", name)
}

func (t *Terminals) get(ctx context.Context, u identity.User, name string) (*nbv1.Terminal, error) {
	term, err := ownedTerminals.get(ctx, t.Kernels.Reader, t.Kernels.Namespace, u, name)
	if errors.Is(err, domainerr.ErrNotFound) && t.APIReader != nil && validName(name) {
		// Missing from the cache: made through another replica a moment ago, or not at all.
		if live, lerr := ownedTerminals.get(ctx, t.APIReader, t.Kernels.Namespace, u, name); lerr == nil {
			return live, nil
		}
	}
	return term, err
}

// terminalModel is Jupyter's model of a terminal as its resource tells.
func terminalModel(term *nbv1.Terminal) jupyter.Terminal {
	m := jupyter.Terminal{Name: term.Name, LastActivity: jupyter.Time{Time: term.CreationTimestamp.Time}}
	if term.Status.LastActivity != nil {
		m.LastActivity.Time = term.Status.LastActivity.Time
	}
	return m
}

// ListTerminals lists the user's terminals (everyone's for an admin), oldest first.
func (t *Terminals) ListTerminals(ctx context.Context, u identity.User) ([]jupyter.Terminal, error) {
	list, err := ownedTerminals.list(ctx, t.Kernels.Reader, t.Kernels.Namespace, u)
	if err != nil {
		return nil, err
	}
	out := make([]jupyter.Terminal, 0, len(list))
	for _, term := range list {
		if term.Status.Phase != nbv1.TerminalEnded {
			out = append(out, terminalModel(term))
		}
	}
	return out, nil
}

// GetTerminal is the user's terminal, with its last activity from its agent when that
// answers at once: the status has it as of the controller's last look.
func (t *Terminals) GetTerminal(ctx context.Context, u identity.User, name string) (jupyter.Terminal, error) {
	term, err := t.get(ctx, u, name)
	if err != nil {
		return jupyter.Terminal{}, err
	}
	if term.Status.Phase == nbv1.TerminalEnded {
		// Jupyter forgets a terminal whose shell exited; the controller deletes it soon.
		return jupyter.Terminal{}, ownedTerminals.missing(name)
	}
	m := terminalModel(term)
	ep, ok := t.agentOf(term)
	if !ok {
		return m, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if st, err := t.Kernels.Agents.TerminalStatus(ctx, ep); err == nil && st.LastActivity.After(m.LastActivity.Time) {
		m.LastActivity.Time = st.LastActivity
	}
	return m, nil
}

// agentOf is where the terminal's agent serves, with its token derived from the terminal's
// identity, as the controller derived the one it gave the pod; false while it does not run.
func (t *Terminals) agentOf(term *nbv1.Terminal) (agentclient.Endpoint, bool) {
	if term.Status.Phase != nbv1.TerminalRunning {
		return agentclient.Endpoint{}, false
	}
	return t.addressOf(term)
}

// addressOf is where the agent of term's pod listens once it does: the pod has its address
// before its agent is ready.
func (t *Terminals) addressOf(term *nbv1.Terminal) (agentclient.Endpoint, bool) {
	if term.Status.PodIP == "" {
		return agentclient.Endpoint{}, false
	}
	token := agenttoken.Terminal(t.Kernels.AgentTokenKey, term.Namespace, term.Name, string(term.UID))
	return agentclient.Endpoint{Host: term.Status.PodIP, Port: agentapi.Port, Token: token}, true
}

// StartTerminal makes a terminal for u as start asks, or finds u's terminal of the name it
// asks for. Its room is reserved in u's usage first: past the terminals limit, or of a
// kernel spec u's policies do not allow, it is refused (403).
func (t *Terminals) StartTerminal(ctx context.Context, u identity.User, start TerminalStart) (jupyter.Terminal, error) {
	k := t.Kernels
	name := start.Name
	if name == "" {
		name = newTerminalName()
	} else {
		if !terminalName.MatchString(name) {
			return jupyter.Terminal{}, domainerr.Invalid("Invalid terminal name %q: a name is 1 to 63 lowercase letters and digits", name)
		}
		if m, found, err := t.named(ctx, u, name); found || err != nil {
			return m, err
		}
	}
	if start.Cwd != "" && !validPath(start.Cwd) {
		return jupyter.Terminal{}, domainerr.Invalid("cwd %q must stay inside your home", start.Cwd)
	}
	var spec *nbv1.KernelSpec
	if err := k.bounded(ctx, "answer for the kernel specs", nil, func(ctx context.Context) (err error) {
		spec, err = k.Specs.find(ctx, k.Specs.reader(ctx), start.KernelSpec)
		return err
	}); err != nil {
		if errors.Is(err, domainerr.ErrNotFound) {
			return jupyter.Terminal{}, domainerr.Invalid("No kernel spec named %s to run the terminal in", start.KernelSpec)
		}
		return jupyter.Terminal{}, err
	}
	home, err := k.homeOf(u, u.Name)
	if err != nil {
		return jupyter.Terminal{}, err
	}
	term := &nbv1.Terminal{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: k.Namespace,
			Labels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue},
		},
		Spec: nbv1.TerminalParameters{Owner: nbv1.Owner(u.Name), KernelSpec: spec.Name, Home: home, Cwd: start.Cwd},
	}
	if err := k.bounded(ctx, "record the terminal in its owner's usage", nil, func(ctx context.Context) error {
		if k.Quota == nil {
			return nil
		}
		_, err := k.Quota.ReserveTerminal(ctx, u.Name, groupsOf(u, u.Name), name, spec)
		return quota.Refusal(err)
	}); err != nil {
		return jupyter.Terminal{}, err
	}
	err = k.bounded(ctx, "create the terminal", term, func(ctx context.Context) error { return k.Writer.Create(ctx, term) })
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		return t.createdMeanwhile(ctx, u, name)
	case errors.Is(err, domainerr.ErrUnavailable):
		// Giving the room back needs the control plane too: it is done once it answers.
		go k.releaseRoom(ctx, nbv1.ReservationTerminal, u.Name, name)
		return jupyter.Terminal{}, err
	default:
		k.releaseRoom(ctx, nbv1.ReservationTerminal, u.Name, name)
		if apierrors.IsInvalid(err) {
			return jupyter.Terminal{}, domainerr.Invalid("%s", err.Error())
		}
		return jupyter.Terminal{}, fmt.Errorf("create terminal: %w", err)
	}
	// The client connects next, through any replica: each must find it.
	waitFresh(ctx, k.Reader, term)
	return terminalModel(term), nil
}

// named finds the terminal called name for a start that asks for it: u's is the answer
// (found); another's, or one being deleted, is a conflict.
func (t *Terminals) named(ctx context.Context, u identity.User, name string) (jupyter.Terminal, bool, error) {
	term := &nbv1.Terminal{}
	err := t.Kernels.Reader.Get(ctx, client.ObjectKey{Namespace: t.Kernels.Namespace, Name: name}, term)
	switch {
	case apierrors.IsNotFound(err):
		return jupyter.Terminal{}, false, nil
	case err != nil:
		return jupyter.Terminal{}, false, fmt.Errorf("get terminal: %w", err)
	case !ownedTerminals.visible(u, term):
		return jupyter.Terminal{}, false, errTerminalNameTaken(name)
	}
	return terminalModel(term), true, nil
}

// createdMeanwhile answers a start whose creation found the name taken after named found it
// free: another start of the same name, through this replica or another, or a cache behind.
// When the terminal is u's, the room reserved is that start's too and stays; otherwise it is
// given back.
func (t *Terminals) createdMeanwhile(ctx context.Context, u identity.User, name string) (jupyter.Terminal, error) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		m, found, err := t.named(wctx, u, name)
		if found {
			return m, nil
		}
		if err != nil || wctx.Err() != nil {
			t.Kernels.releaseRoom(ctx, nbv1.ReservationTerminal, u.Name, name)
			return jupyter.Terminal{}, errTerminalNameTaken(name)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-wctx.Done():
		}
	}
}

// TerminalEnded answers a connection to a terminal that has nothing left to connect to: its
// shell exited, or its pod failed (OOMKilled, evicted, an image that could not be pulled).
// A failed Terminal stays until it is deleted; an ended one is deleted by its controller
// shortly after. Outside a WebSocket it is a conflict (409).
type TerminalEnded struct {
	// Failed tells a pod that failed from a shell that exited.
	Failed bool
	// Reason and Message are those of the terminal's Ready condition, when it has one.
	Reason, Message string
}

func (e *TerminalEnded) Error() string {
	what := "The terminal has ended"
	if e.Failed {
		what = "The terminal's pod failed"
	}
	switch {
	case e.Reason != "" && e.Message != "":
		return what + ": " + e.Reason + ": " + e.Message
	case e.Reason != "" || e.Message != "":
		return what + ": " + e.Reason + e.Message
	}
	return what
}

// Is makes it a conflict for the API's error answers.
func (e *TerminalEnded) Is(target error) bool { return target == domainerr.ErrConflict }

// TerminalEndpoint is where the user's terminal's agent serves it. A terminal whose pod is
// still coming is waited for, within the start timeout (then a start failure, 500, reason
// StartTimeout); one that has ended is a *TerminalEnded.
func (t *Terminals) TerminalEndpoint(ctx context.Context, u identity.User, name string) (agentclient.Endpoint, error) {
	wait := t.Kernels.StartTimeout
	if wait <= 0 {
		wait = DefaultTerminalStartTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// The agent answers as soon as the controller records it running: the poll of the cache
	// (memory, so cheap) starts fast and slows down to 50 ms, a delay a user does not see.
	pause := 10 * time.Millisecond
	// A pending terminal's agent is asked itself, as a kernel start asks its agent: the
	// kubelet's readiness probe, and the controller's status write after it, come later.
	askPause, askAgain := 10*time.Millisecond, time.Time{}
	for {
		term, err := t.get(wctx, u, name)
		switch {
		case err != nil && wctx.Err() == nil:
			return agentclient.Endpoint{}, err
		case err != nil:
		case term.Status.Phase == nbv1.TerminalEnded || term.Status.Phase == nbv1.TerminalFailed:
			ended := &TerminalEnded{Failed: term.Status.Phase == nbv1.TerminalFailed}
			if c := meta.FindStatusCondition(term.Status.Conditions, nbv1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
				ended.Reason, ended.Message = c.Reason, c.Message
			}
			return agentclient.Endpoint{}, ended
		default:
			if ep, ok := t.agentOf(term); ok {
				return ep, nil
			}
			if ep, ok := t.addressOf(term); ok && term.Status.Phase == nbv1.TerminalPending && !time.Now().Before(askAgain) {
				if t.agentAnswers(wctx, ep) {
					return ep, nil
				}
				askAgain = time.Now().Add(askPause)
				askPause = min(2*askPause, 160*time.Millisecond)
			}
		}
		select {
		case <-time.After(pause):
			pause = min(2*pause, 50*time.Millisecond)
		case <-wctx.Done():
			if ctx.Err() != nil {
				return agentclient.Endpoint{}, ctx.Err()
			}
			return agentclient.Endpoint{}, startFailed("StartTimeout", fmt.Sprintf("the terminal did not start within %s", wait))
		}
	}
}

// agentAnswers tells whether the terminal agent at ep answers its status, briefly.
func (t *Terminals) agentAnswers(ctx context.Context, ep agentclient.Endpoint) bool {
	if t.Kernels.Agents == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := t.Kernels.Agents.TerminalStatus(ctx, ep)
	return err == nil
}

// DeleteTerminal ends the user's terminal: its agent is asked to hang its shell up (briefly:
// deleting the pod ends it anyway), then its resource is deleted, with its pod, and its room
// given back.
func (t *Terminals) DeleteTerminal(ctx context.Context, u identity.User, name string) error {
	term, err := t.get(ctx, u, name)
	if err != nil {
		return err
	}
	if ep, ok := t.agentOf(term); ok {
		t.Kernels.askShutdown(ctx, ep, 5*time.Second, "terminal", term.Name)
	}
	return t.Kernels.removeHolder(ctx, term, nbv1.ReservationTerminal, string(term.Spec.Owner))
}
