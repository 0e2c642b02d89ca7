// Command pause is the pod sandbox's process in the test cluster (containerd's sandbox_image):
// it holds the pod's namespaces open, reaps the zombies that land on it as PID 1, and exits on
// SIGTERM or SIGINT. The registry's pause image is not reachable here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
