package apiserver

import (
	"unicode"
	"unicode/utf8"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
)

// Jupyter Server in gateway mode (--gateway-url) starts kernels with an "env": its user in
// KERNEL_USERNAME, the notebook's directory in KERNEL_WORKING_DIR, and every other KERNEL_*
// variable of its own environment and those of its env whitelist. nbkube takes the user and
// the directory, reads the KERNEL_<NAME> variables that name launch parameters of the spec,
// passes on what kernelEnvPassed lists, and drops the rest: the gateway sends
// all it has, so an unknown name is no error, and what decides a kernel's image, identity or
// place (KERNEL_IMAGE, KERNEL_UID, KERNEL_NAMESPACE, ...) is the admin's, in KernelSpecs.

// Bounds of a start's env: the gateway sends a handful of variables, and a request is small.
const (
	maxKernelEnvVars  = 256
	maxKernelEnvName  = 256
	maxKernelEnvValue = 32 << 10
	// maxUserName is the longest owner a Kernel records.
	maxUserName = 253
	// maxKernelParameters is the most launch parameters a start may name (a KernelSpec
	// declares at most 32).
	maxKernelParameters = 32
)

// The variables of a start's env that nbkube reads.
const (
	envUsername   = "KERNEL_USERNAME"
	envWorkingDir = "KERNEL_WORKING_DIR"
)

// kernelEnvPassed are the variables of a start's env that reach the kernel's environment.
// KERNEL_USERNAME is there as Enterprise Gateway's kernels have it: the kernel's owner.
// KERNEL_WORKING_DIR becomes the working directory and KERNEL_LAUNCH_TIMEOUT is the client's
// own (nbkube's start timeout bounds a start); neither is passed. Whatever nbkube sets in a
// kernel's environment itself cannot be overridden by any env (the pod builder's rule).
var kernelEnvPassed = map[string]bool{
	envUsername: true,
}

// kernelStart is the start a POST /api/kernels body asks of user u: the kernel's spec, its
// working directory, its user and its environment. Naming another user in KERNEL_USERNAME
// takes the right to act for others (admins have it).
func kernelStart(u User, spec string, body jupyter.StartKernel) (repository.KernelStart, error) {
	start := repository.KernelStart{Name: spec, Path: body.Path, Parameters: body.Parameters}
	if len(body.Parameters) > maxKernelParameters {
		return start, domainerr.Invalid("parameters has %d values, more than %d", len(body.Parameters), maxKernelParameters)
	}
	if len(body.Env) == 0 {
		return start, nil
	}
	if len(body.Env) > maxKernelEnvVars {
		return start, domainerr.Invalid("env has %d variables, more than %d", len(body.Env), maxKernelEnvVars)
	}
	for name, value := range body.Env {
		if len(name) == 0 || len(name) > maxKernelEnvName {
			return start, domainerr.Invalid("env: a variable name must have 1 to %d bytes", maxKernelEnvName)
		}
		if len(value) > maxKernelEnvValue {
			return start, domainerr.Invalid("env %s: the value is longer than %d bytes", name, maxKernelEnvValue)
		}
	}
	if name := body.Env[envUsername]; name != "" {
		if !validUserName(name) {
			return start, domainerr.Invalid("%s %q is not a user name", envUsername, name)
		}
		if name != u.Name && !u.Admin && !u.ActAs {
			return start, domainerr.Forbidden("user %s may not start kernels for other users", u.Name)
		}
		start.Owner = name
	}
	start.WorkingDir = body.Env[envWorkingDir]
	// The spec's launch parameters may be KERNEL_<NAME> variables (repository.KernelStart).
	start.GatewayEnv = body.Env
	for name, value := range body.Env {
		if !kernelEnvPassed[name] {
			continue
		}
		if start.Env == nil {
			start.Env = map[string]string{}
		}
		start.Env[name] = value
	}
	if _, ok := start.Env[envUsername]; ok && start.Owner == "" {
		// An empty KERNEL_USERNAME names the caller, and the kernel sees who that is.
		start.Env[envUsername] = u.Name
	}
	return start, nil
}

// validUserName tells whether a KERNEL_USERNAME can be an owner: 1 to 253 bytes of UTF-8
// without spaces or control characters. Providers know stricter names (the users file's
// letters, digits and ".-_@+"), but a gateway's users may come from elsewhere (JupyterHub, a
// Kubernetes "system:serviceaccount:..." name), and the name only has to be recorded and
// compared.
func validUserName(name string) bool {
	if len(name) == 0 || len(name) > maxUserName || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
