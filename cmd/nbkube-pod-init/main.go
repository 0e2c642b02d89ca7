// Command nbkube-pod-init is the init of the local node's sandboxes, and their spawner (see
// internal/podns): the smallest program that can be one, since a sandbox waits for it to
// start. `nbkube local` runs it from beside its own binary, and falls back to nbkube-agent
// (which can be one too) where it is missing.
package main

import (
	"fmt"
	"os"

	"github.com/nbkube/nbkube/internal/podns"
)

func main() {
	podns.RunInitIfAsked()
	fmt.Fprintln(os.Stderr, "nbkube-pod-init: `nbkube local` runs this program in its sandboxes; it does nothing when run by hand")
	os.Exit(2)
}
