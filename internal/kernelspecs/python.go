package kernelspecs

import (
	"context"
	"os/exec"
	"time"
)

// PythonSpec is the "python3" kernel spec of the first of the candidate interpreters that
// has ipykernel, for a host that has Python but never installed a kernel.json (pip installs
// of ipykernel into a virtualenv, say). The second result is false when none has it.
func PythonSpec(ctx context.Context, candidates []string) (Spec, bool) {
	for _, c := range candidates {
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = exec.CommandContext(ctx, path, "-c", "import ipykernel_launcher").Run()
		cancel()
		if err != nil {
			continue
		}
		return Spec{Name: "python3", JSON: KernelJSON{
			Argv:        []string{path, "-m", "ipykernel_launcher", "-f", "{connection_file}"},
			DisplayName: "Python 3 (ipykernel)",
			Language:    "python",
		}}, true
	}
	return Spec{}, false
}
