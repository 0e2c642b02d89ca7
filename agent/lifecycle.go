package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

// ExitError carries the kernel's exit code out of Run, so that the pod's container exits as
// the kernel did.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("kernel exited with code %d", e.Code) }

// ExitCode is the status a program (the agent, nbkube) ends with after its run returned err:
// 0 without one, the kernel's own code for an ExitError, 2 for a usage error (flag.ErrHelp,
// whose text the flag package printed) and 1 for any other error, which report says to print.
func ExitCode(err error) (code int, report bool) {
	var exit *ExitError
	switch {
	case err == nil:
		return 0, false
	case errors.As(err, &exit):
		return exit.Code, false
	case errors.Is(err, flag.ErrHelp):
		return 2, false
	}
	return 1, true
}

// launchAttempts is how many kernel processes a launch starts before it gives up on a kernel
// that exits while starting.
const launchAttempts = 3

// launch starts a kernel incarnation and makes it the one clients talk to once it answers
// kernel_info. The caller holds a.life. When the process fails first, the error is its exit.
//
// A kernel that exits before answering is started again, with new ports: the ports are
// chosen free, then bound by the kernel, and where kernels share the host's network (nbkube
// local, tests) another process may bind one in between, which the kernel dies of
// ("Address already in use"). So is a kernel that lives on but cannot be connected to: the
// process that took its heartbeat port answers there instead (ipykernel binds its heartbeat in
// a thread, which dies of it while the kernel runs). A kernel that cannot start at all fails
// launchAttempts times.
func (a *Agent) launch() error {
	for attempt := 1; ; attempt++ {
		err := a.launchOnce()
		var exit *ExitError
		retry := errors.As(err, &exit) || errors.Is(err, errNotConnected)
		if err == nil || !retry || attempt == launchAttempts || a.isStopping() {
			return err
		}
		a.cfg.Log.Info("Kernel exited or could not be connected to while starting; starting it again with new ports",
			"kernel", a.cfg.KernelID, "error", err.Error(), "attempt", attempt)
	}
}

// errNotConnected is a launch whose kernel the agent could not connect to.
var errNotConnected = errors.New("the kernel could not be connected to")

func (a *Agent) isStopping() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopping
}

// launchOnce is one attempt of launch.
func (a *Agent) launchOnce() error {
	inc, err := a.startIncarnation()
	if err != nil {
		return err
	}
	a.cfg.Log.Info("Started kernel", "kernel", a.cfg.KernelID, "pid", inc.pid, "forked", inc.forked, "restart", a.restarts.Load())
	go a.watch(inc)
	fail := func(err error) error {
		inc.close()
		if !inc.alive() {
			if exit := exitError(inc.exitErr); exit != nil {
				return exit
			}
		}
		inc.kill()
		return err
	}
	if err := inc.connect(a.identity); err != nil {
		return fail(fmt.Errorf("%w: %w", errNotConnected, err))
	}
	for _, ch := range []string{wire.Shell, wire.Control, wire.Stdin, wire.IOPub} {
		go a.recvLoop(inc, ch)
	}
	requests, err := a.nudge(inc)
	if err != nil {
		return fail(err)
	}
	a.cfg.Log.Info("Kernel answered kernel_info", "kernel", a.cfg.KernelID, "requests", requests,
		"afterStart", time.Since(inc.started).Round(time.Millisecond).String())
	go a.heartbeat(inc, heartbeatEchoes(inc))
	a.mu.Lock()
	a.inc = inc
	held := a.held
	a.held = nil
	a.mu.Unlock()
	for _, h := range held {
		if err := inc.send(h.channel, h.frames); err != nil {
			a.cfg.Log.Error(err, "Send held message", "channel", h.channel)
		}
		a.mem.release(h.size)
	}
	return nil
}

// nudge asks for kernel_info until the kernel replies and iopub has delivered a message:
// only then is the iopub subscription known to be live (the late-joiner problem). A request on
// the connected shell socket waits there until the kernel reads it, and a kernel still
// initialising answers every request it finds queued, each with a reply and two status
// messages, work that kernels starting side by side take from each other. So until a first
// reply the wait before asking again starts at unansweredResend and doubles up to four times
// that. A reply with nothing on iopub means the subscription missed its status messages; then
// the next request follows quickly.
func (a *Agent) nudge(inc *incarnation) (requests int, err error) {
	deadline := time.NewTimer(a.cfg.StartTimeout)
	defer deadline.Stop()
	replies := make(chan *wire.Message, 64)
	var ids []string
	defer func() {
		a.mu.Lock()
		for _, id := range ids {
			delete(a.pending, id)
		}
		a.mu.Unlock()
	}()
	replied := false
	delay, unanswered := 5*time.Millisecond, unansweredResend
	for {
		id, err := a.requestInto(inc, wire.Shell, "kernel_info_request", `{}`, replies)
		if err != nil {
			return len(ids), err
		}
		ids = append(ids, id)
		wait := unanswered
		unanswered = min(unanswered*2, 4*unansweredResend)
		if replied {
			wait = delay
			delay = min(delay*2, 500*time.Millisecond)
		}
		tick := time.NewTimer(wait)
		for waiting := true; waiting; {
			select {
			case <-replies:
				if !replied {
					replied = true
					a.mu.Lock()
					a.state = agentapi.ExecutionIdle
					a.mu.Unlock()
				}
				select {
				case <-inc.iopubSeen:
					tick.Stop()
					return len(ids), nil
				default:
				}
				tick.Reset(delay)
			case <-inc.iopubSeen:
				if replied {
					tick.Stop()
					return len(ids), nil
				}
			case <-tick.C:
				waiting = false
			case <-inc.exited:
				tick.Stop()
				return len(ids), errors.New("the kernel exited before answering kernel_info")
			case <-deadline.C:
				tick.Stop()
				return len(ids), fmt.Errorf("the kernel did not answer kernel_info within %s", a.cfg.StartTimeout)
			}
		}
	}
}

// unansweredResend is how long nudge first waits for a reply before it asks again, as
// jupyter_client's wait_for_ready does.
const unansweredResend = time.Second

// watch handles the end of an incarnation's process: a death nobody asked for restarts the
// kernel, as Jupyter's restarter does, or ends the agent after too many.
func (a *Agent) watch(inc *incarnation) {
	<-inc.exited
	a.mu.Lock()
	current := a.inc == inc
	stopping := a.stopping
	a.mu.Unlock()
	if !current || stopping {
		// Stopped on purpose, or it never became the current one (launch reports that).
		return
	}
	a.life.Lock()
	defer a.life.Unlock()
	a.mu.Lock()
	if a.inc != inc || a.stopping {
		a.mu.Unlock()
		return
	}
	a.inc = nil
	a.endRunsLocked()
	ranFor := time.Since(inc.started)
	if ranFor > time.Minute {
		a.autoRestarts = 0
	}
	a.autoRestarts++
	giveUp := a.autoRestarts > a.cfg.MaxRestarts
	a.lastDeath = death(inc.exitErr, time.Now(), int(a.restarts.Load())+1)
	a.mu.Unlock()
	inc.close()
	a.cfg.Log.Info("Kernel died", "kernel", a.cfg.KernelID, "error", fmt.Sprint(inc.exitErr), "ranFor", ranFor.Round(time.Millisecond))
	if giveUp {
		a.setState(agentapi.ExecutionDead, true)
		a.done <- exitError(inc.exitErr)
		return
	}
	a.setState(agentapi.ExecutionRestarting, true)
	if err := a.launch(); err != nil {
		a.cfg.Log.Error(err, "Restart after the kernel died failed")
		a.setState(agentapi.ExecutionDead, true)
		a.done <- err
		return
	}
	a.restarts.Add(1)
}

// restart replaces the kernel process with a new one: same kernel, same clients, who see
// "restarting" and then the new kernel's "starting"/"idle".
func (a *Agent) restart(ctx context.Context) error {
	a.life.Lock()
	defer a.life.Unlock()
	a.mu.Lock()
	if a.stopping {
		a.mu.Unlock()
		return errors.New("the kernel is shutting down")
	}
	old := a.inc
	a.inc = nil
	a.endRunsLocked()
	a.mu.Unlock()
	a.setState(agentapi.ExecutionRestarting, true)
	if old != nil {
		a.stopIncarnation(old, true)
	}
	if err := a.launch(); err != nil {
		a.setState(agentapi.ExecutionDead, true)
		a.done <- err
		return err
	}
	a.restarts.Add(1)
	return ctx.Err()
}

// stopIncarnation asks the kernel to shut down and, once it has answered (its shutdown hooks
// have run) and had Config.ExitAfterReply to exit, ends the process rather than waiting for
// ipykernel to wind down its event loop by itself, which takes a few hundred milliseconds; it
// returns once the process has exited.
func (a *Agent) stopIncarnation(inc *incarnation, restart bool) {
	defer inc.close()
	if !inc.alive() {
		return
	}
	content := `{"restart":false}`
	if restart {
		content = `{"restart":true}`
	}
	reply := make(chan *wire.Message, 1)
	if _, err := a.requestInto(inc, wire.Control, "shutdown_request", content, reply); err == nil {
		t := time.NewTimer(a.cfg.StopGrace)
		select {
		case <-reply:
		case <-inc.exited:
		case <-t.C:
		}
		t.Stop()
	}
	if inc.wait(a.cfg.ExitAfterReply) {
		return
	}
	_ = inc.signal(syscall.SIGTERM)
	if !inc.wait(a.cfg.StopGrace) {
		inc.kill()
	}
}

// stop shuts the kernel down for good and closes every client connection.
func (a *Agent) stop() {
	a.mu.Lock()
	a.stopping = true
	inc := a.inc
	a.mu.Unlock()
	a.life.Lock()
	defer a.life.Unlock()
	a.mu.Lock()
	if a.inc != nil {
		inc = a.inc
	}
	a.mu.Unlock()
	if inc != nil {
		a.stopIncarnation(inc, false)
	}
	a.setState(agentapi.ExecutionDead, false)
	a.closeAll()
}

// interrupt interrupts the running cell as the kernel spec says.
func (a *Agent) interrupt(ctx context.Context) error {
	a.mu.Lock()
	inc := a.inc
	a.mu.Unlock()
	if inc == nil {
		return errors.New("the kernel is not running")
	}
	if a.cfg.InterruptMode == "message" {
		reply := make(chan *wire.Message, 1)
		if _, err := a.requestInto(inc, wire.Control, "interrupt_request", `{}`, reply); err != nil {
			return err
		}
		select {
		case <-reply:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the kernel did not answer interrupt_request")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return inc.signal(syscall.SIGINT)
}

// writeTerminationLog says why the kernel did not start, with the end of its stderr.
func (a *Agent) writeTerminationLog(err error) {
	if a.cfg.TerminationLog == "" {
		return
	}
	msg := "the kernel did not start: " + err.Error()
	var exit *ExitError
	if errors.As(err, &exit) {
		msg = fmt.Sprintf("the kernel exited with code %d before it answered", exit.Code)
	}
	if t := a.stderrTail.String(); t != "" {
		msg += "; its last output:\n" + t
	}
	if werr := os.WriteFile(a.cfg.TerminationLog, []byte(msg), 0o644); werr != nil {
		a.cfg.Log.Error(werr, "Write the termination message")
	}
}

// death describes the end of a kernel process whose Wait returned err, seen at, before
// the restart numbered restart.
func death(err error, at time.Time, restart int) *agentapi.Death {
	d := &agentapi.Death{At: at.UTC(), ExitCode: -1, Restart: restart}
	if ws, ok := waitStatus(err); ok {
		d.ExitCode = ws.ExitStatus()
		if ws.Signaled() {
			d.ExitCode = 128 + int(ws.Signal())
			d.Signal = unix.SignalName(ws.Signal())
		}
	}
	return d
}

// exitError is the exit of the kernel's process as an *ExitError, a death by a signal as a
// shell reports it (128 + the signal); any other error stays as it is.
func exitError(err error) error {
	if ws, ok := waitStatus(err); ok {
		code := ws.ExitStatus()
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return &ExitError{Code: code}
	}
	return err
}
