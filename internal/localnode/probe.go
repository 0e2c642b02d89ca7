package localnode

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/podns"
)

// probeKind names a probe as the kubelet's events do ("Readiness probe failed: ...").
type probeKind string

const (
	probeStartup   probeKind = "Startup"
	probeReadiness probeKind = "Readiness"
	probeLiveness  probeKind = "Liveness"
)

// probeUserAgent is what the kubelet's HTTP probes send, so that servers that treat probes
// specially see the same thing here.
const probeUserAgent = "kube-probe/1.36"

// maxProbeOutput bounds what a failed probe quotes of a response body or command output.
const maxProbeOutput = 10 * 1024

// prober runs one probe of one container run, like a kubelet probe worker: it waits
// initialDelaySeconds, probes every periodSeconds with timeoutSeconds, and reports when
// successThreshold successes or failureThreshold failures in a row change the result.
type prober struct {
	kind      probeKind
	probe     *corev1.Probe
	container *corev1.Container
	podIP     string
	// sandbox reaches into the container's sandbox, where a TCP probe of the pod IP connects:
	// the node's own listener at the pod IP takes every connection, whether the container
	// listens or not. nil for a container of the host.
	sandbox *podns.Control
	// exec runs an exec probe's command, on the host or in the container's sandbox; nil when
	// the probe is not an exec probe.
	exec  *execProbe
	clock clock.WithTicker
	// unhealthy records an "Unhealthy" event for a failed attempt.
	unhealthy func(message string)
	// report delivers a changed result; it returns false once nobody listens any more.
	report func(success bool) bool
}

// execProbe is an exec probe's command resolved for the host, with the container's environment,
// or the reason it could not be resolved, which every attempt then reports.
type execProbe struct {
	cmd hostCommand
	env []string
	err error
	// inSandbox, for a sandboxed container, is the command as the container sees it, run
	// inside its sandbox (cmd is then unused).
	inSandbox *podns.Exec
}

// run probes until ctx is done or, for a startup probe, until it succeeded once.
func (p *prober) run(ctx context.Context) {
	if d := seconds(p.probe.InitialDelaySeconds, 0); d > 0 {
		t := p.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
	ticker := p.clock.NewTicker(seconds(p.probe.PeriodSeconds, 10))
	defer ticker.Stop()

	successThreshold := max(p.probe.SuccessThreshold, 1)
	failureThreshold := p.probe.FailureThreshold
	if failureThreshold <= 0 {
		failureThreshold = 3
	}
	// The kubelet's initial results: not ready, alive, and not yet started.
	var last *bool
	switch p.kind {
	case probeReadiness:
		last = ptr.To(false)
	case probeLiveness:
		last = ptr.To(true)
	}
	var successes, failures int32
	for {
		err := p.probeOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			successes, failures = successes+1, 0
		} else {
			successes, failures = 0, failures+1
			p.unhealthy(fmt.Sprintf("%s probe failed: %v", p.kind, err))
		}
		var result *bool
		switch {
		case successes >= successThreshold:
			result = ptr.To(true)
		case failures >= failureThreshold:
			result = ptr.To(false)
		}
		if result != nil && (last == nil || *last != *result) {
			last = result
			if !p.report(*result) {
				return
			}
		}
		if p.kind == probeStartup && last != nil && *last {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func seconds(s int32, def int) time.Duration {
	if s <= 0 {
		return time.Duration(def) * time.Second
	}
	return time.Duration(s) * time.Second
}

// probeOnce makes one attempt; a nil error is a success.
func (p *prober) probeOnce(ctx context.Context) error {
	// Network and process timeouts run on the real clock: they bound real I/O.
	ctx, cancel := context.WithTimeout(ctx, seconds(p.probe.TimeoutSeconds, 1))
	defer cancel()
	h := p.probe.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		return p.httpGet(ctx, h.HTTPGet)
	case h.TCPSocket != nil:
		port, err := containerPort(h.TCPSocket.Port, p.container)
		if err != nil {
			return err
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = p.podIP
		}
		var conn net.Conn
		if p.sandbox != nil && host == p.podIP {
			conn, err = p.sandbox.Dial(ctx, port)
		} else {
			var d net.Dialer
			conn, err = d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		}
		if err != nil {
			return err
		}
		return conn.Close()
	case h.Exec != nil && p.exec != nil && p.exec.inSandbox != nil:
		return runSandboxExecProbe(ctx, p.sandbox, *p.exec.inSandbox)
	case h.Exec != nil && p.exec != nil:
		return runExecProbe(ctx, p.exec)
	}
	return errors.New("the probe has no handler the local node runs")
}

func (p *prober) httpGet(ctx context.Context, g *corev1.HTTPGetAction) error {
	port, err := containerPort(g.Port, p.container)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = p.podIP
	}
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path}
	}
	u.Scheme = strings.ToLower(string(g.Scheme))
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", probeUserAgent)
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	// A fresh transport per attempt, without proxies from the environment and without
	// keep-alives, as the kubelet's prober: probes must reach the pod directly and leave no idle
	// connections behind. Certificates are not verified, as the kubelet does not either.
	transport := &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet's HTTPS probes
	}
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProbeOutput))
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return fmt.Errorf("HTTP probe failed with statuscode: %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}

// containerPort resolves a probe's port: a number, or the name of one of the container's ports.
func containerPort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, port.StrVal)
}

func runExecProbe(ctx context.Context, e *execProbe) error {
	if e.err != nil {
		return e.err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, e.cmd.path, e.cmd.argv[1:]...)
	cmd.Args[0] = e.cmd.argv[0]
	cmd.Env, cmd.Dir = append([]string{}, e.env...), e.cmd.dir // never nil, which would mean nbkube's environment
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// On timeout the whole group goes, not just the command: a probe script's children must not
	// linger.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("command %q timed out", strings.Join(e.cmd.argv, " "))
	}
	if err != nil {
		return fmt.Errorf("command %q: %w: %s", strings.Join(e.cmd.argv, " "), err, bytes.TrimSpace(limit(out.Bytes())))
	}
	return nil
}

// runSandboxExecProbe runs an exec probe's command inside the container's sandbox, where the
// container's own processes run: its root, its user, no capabilities.
func runSandboxExecProbe(ctx context.Context, sandbox *podns.Control, e podns.Exec) error {
	if deadline, ok := ctx.Deadline(); ok {
		e.Timeout = max(time.Until(deadline), time.Millisecond)
	}
	r, err := sandbox.Exec(ctx, e)
	switch {
	case ctx.Err() != nil || r.TimedOut:
		return fmt.Errorf("command %q timed out", strings.Join(e.Argv, " "))
	case err != nil:
		return fmt.Errorf("command %q: %w", strings.Join(e.Argv, " "), err)
	case r.ExitCode != 0:
		return fmt.Errorf("command %q: exit status %d: %s", strings.Join(e.Argv, " "), r.ExitCode, bytes.TrimSpace(limit(r.Output)))
	}
	return nil
}

func limit(b []byte) []byte {
	if len(b) > maxProbeOutput {
		return b[:maxProbeOutput]
	}
	return b
}

// containerStarted marks a run as started (its startup probe passed, or it has none) and starts
// its readiness and liveness probes, which the kubelet holds back until then.
func (w *podWorker) containerStarted(c *container, run *containerRun) {
	run.started = true
	w.startProber(c, run, probeReadiness, c.spec.ReadinessProbe)
	w.startProber(c, run, probeLiveness, c.spec.LivenessProbe)
}

func (w *podWorker) startProber(c *container, run *containerRun, kind probeKind, probe *corev1.Probe) {
	if probe == nil {
		return
	}
	// The prober runs on its own goroutine: it gets the event reference, not the worker's pod.
	ref := w.containerRef(c)
	p := &prober{
		kind:      kind,
		probe:     probe,
		container: c.spec,
		podIP:     w.ip,
		sandbox:   run.proc.control,
		clock:     w.node.cfg.Clock,
		unhealthy: func(msg string) { w.event(ref, corev1.EventTypeWarning, eventUnhealthy, msg) },
		report: func(success bool) bool {
			select {
			case <-run.probeCtx.Done():
				return false
			default:
				return w.send(workerEvent{c: c, run: run, probe: kind, success: success})
			}
		},
	}
	switch {
	case probe.Exec != nil && run.proc.control != nil:
		dir := c.spec.WorkingDir
		if dir == "" {
			dir = "/"
		}
		p.exec = &execProbe{inSandbox: &podns.Exec{Argv: probe.Exec.Command, Env: run.env, Dir: dir}}
	case probe.Exec != nil:
		// The kubelet runs exec probes as they are: no $(VAR) expansion.
		noVars := func(string) (string, bool) { return "", false }
		probeContainer := &corev1.Container{Name: c.spec.Name, Command: probe.Exec.Command, WorkingDir: c.spec.WorkingDir}
		cmd, err := resolveCommand(probeContainer, run.mounts, noVars, w.podDir, w.node.resolver)
		p.exec = &execProbe{cmd: cmd, env: run.env, err: err}
	}
	w.background.Go(func() { p.run(run.probeCtx) })
}

// killForProbe stops a run whose liveness or startup probe failed; its exit then restarts it
// as the restart policy says.
func (w *podWorker) killForProbe(c *container, run *containerRun, kind probeKind) {
	if run.killing {
		return
	}
	run.killing = true
	w.event(w.containerRef(c), corev1.EventTypeNormal, eventKilling,
		fmt.Sprintf("Container %s failed %s probe, will be restarted", c.spec.Name, strings.ToLower(string(kind))))
	probe := c.spec.LivenessProbe
	if kind == probeStartup {
		probe = c.spec.StartupProbe
	}
	grace := terminationGrace(w.pod)
	if probe.TerminationGracePeriodSeconds != nil {
		grace = max(time.Duration(*probe.TerminationGracePeriodSeconds)*time.Second, minGracePeriod)
	}
	proc := run.proc
	w.background.Go(func() { proc.stop(grace, w.node.cfg.Clock) })
}
