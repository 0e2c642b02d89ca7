// Command nbkube-agent runs a kernel inside a kernel pod (`nbkube-agent [flags] -- ARGV...`,
// after `nbkube-agent install DEST` in the init container; `check` and `pause` are the image
// puller's):
// the agent of package agent, alone in a small static binary. The kernel pod's init
// container copies it into the pod, so its size and memory are paid once per kernel; the
// operator's nbkube binary carries the whole Kubernetes client and would cost several times
// as much.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/nbkube/nbkube/agent"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/podns"
)

func main() {
	// The local node starts its sandboxes' init from this small binary rather than from
	// nbkube, whose start costs a fifth of a second of CPU (see internal/podns).
	podns.RunInitIfAsked()
	// `nbkube-agent install DEST` is the kernel pod's init container: it puts this binary
	// into the pod's emptyDir.
	if len(os.Args) == 3 && os.Args[1] == agentapi.CommandInstall {
		self, err := os.Executable()
		if err == nil {
			err = agent.Install(self, os.Args[2])
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", agentapi.BinaryName, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) == 2 {
		switch os.Args[1] {
		case agentapi.CommandCheck:
			return
		case agentapi.CommandPause:
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			<-ctx.Done()
			stop()
			return
		}
	}
	// One kernel's traffic needs no more than one P, and with one there are no idle Ps to
	// wake (a futex call) for every message relayed, a large part of the agent's CPU per
	// message. GOMAXPROCS in the environment still decides.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := agent.Main(ctx, agentapi.BinaryName, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	code, report := agent.ExitCode(err)
	if report {
		fmt.Fprintf(os.Stderr, "%s: %v\n", agentapi.BinaryName, err)
	}
	os.Exit(code)
}
