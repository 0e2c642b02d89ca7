// Command nbkube is the nbkube binary: the operator's manager, the API server alone, the
// embedded local default (`nbkube local`), and the agent that runs in every kernel pod. This
// package only wires the parts together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nbkube/nbkube/agent"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `nbkube serves the Jupyter notebook server API on Kubernetes.

Usage:
  nbkube manager [flags]            run the controllers (in a cluster)
  nbkube apiserver [flags]          run the Jupyter API server alone (in a cluster, any number of replicas)
  nbkube local [flags]              run everything on this machine: control plane, controllers, local node
  nbkube agent [flags] -- ARGV...   run a kernel inside a kernel pod (as nbkube-agent does)
  nbkube cleanup [flags]            delete the namespace's sessions, kernels, clusters and kernel specs (helm uninstall runs it)
  nbkube install DEST               copy nbkube-agent (or this binary) to DEST (the kernel pod's init container)
  nbkube version                    print the version

Run 'nbkube COMMAND -h' for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var run func(context.Context, []string) error
	switch cmd {
	case "manager":
		run = runManager
	case "apiserver":
		run = runAPIServer
	case "local":
		run = runLocal
	case "agent":
		run = runAgent
	case "cleanup":
		run = runCleanup
	case "install":
		run = runInstall
	case "version", "--version":
		fmt.Println(version)
		return
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "nbkube: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	// The first SIGINT or SIGTERM cancels the context for a clean shutdown; a second one exits
	// at once (children still die with us: they are started with a parent-death signal).
	ctx := ctrl.SetupSignalHandler()
	err := run(ctx, args)
	var exit *agent.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		os.Exit(exit.Code)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "nbkube %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

// newFlagSet makes a command's flag set with the logging flags every command shares.
func newFlagSet(name string) (*flag.FlagSet, *zap.Options) {
	fs := flag.NewFlagSet("nbkube "+name, flag.ContinueOnError)
	logOpts := &zap.Options{Development: false}
	logOpts.BindFlags(fs)
	return fs, logOpts
}
