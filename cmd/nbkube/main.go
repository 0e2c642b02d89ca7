// Command nbkube is the nbkube binary: the operator's manager, the API server alone, the
// embedded local default (`nbkube local`), and the agent that runs in every kernel pod. This
// package only wires the parts together.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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
  nbkube users hash|token NAME      hash a password or token for the users file, or make a user's token
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
	case "users":
		run = runUsers
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
	if cmd == "manager" || cmd == "apiserver" {
		applyMemoryLimit(os.Getenv)
	}
	err := run(ctx, args)
	code, report := agent.ExitCode(err)
	if report {
		fmt.Fprintf(os.Stderr, "nbkube %s: %v\n", cmd, err)
	}
	os.Exit(code)
}

// newFlagSet makes a command's flag set with the logging flags every command shares. Logs are
// zap's console lines, for a person at a terminal, unless --log-format=json asks for the JSON
// that log collectors read (the Helm chart does).
func newFlagSet(name string) (*flag.FlagSet, *zap.Options) {
	fs := flag.NewFlagSet("nbkube "+name, flag.ContinueOnError)
	logOpts := &zap.Options{Development: false, NewEncoder: consoleEncoder}
	logOpts.BindFlags(fs)
	fs.Func("log-format", "log `format`: console (readable lines, the default) or json", func(s string) error {
		switch s {
		case "console":
			logOpts.NewEncoder = consoleEncoder
		case "json":
			logOpts.NewEncoder = jsonEncoder
		default:
			return fmt.Errorf(`%q: want "console" or "json"`, s)
		}
		return nil
	})
	return fs, logOpts
}

// consoleEncoder and jsonEncoder are zap's encoders with controller-runtime's settings for
// each: its development encoder configuration for the console, its production one for JSON.
func consoleEncoder(opts ...zap.EncoderConfigOption) zapcore.Encoder {
	return zapcore.NewConsoleEncoder(encoderConfig(uberzap.NewDevelopmentEncoderConfig(), opts))
}

func jsonEncoder(opts ...zap.EncoderConfigOption) zapcore.Encoder {
	return zapcore.NewJSONEncoder(encoderConfig(uberzap.NewProductionEncoderConfig(), opts))
}

func encoderConfig(c zapcore.EncoderConfig, opts []zap.EncoderConfigOption) zapcore.EncoderConfig {
	for _, o := range opts {
		o(&c)
	}
	return c
}
