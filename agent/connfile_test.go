package agent

import "testing"

func TestKernelIP_IsThePodsOwnOnlyOnTheLocalNode(t *testing.T) {
	for listen, want := range map[string]string{
		"10.244.0.7:8777": "127.0.0.1", // a pod with its own network namespace
		"127.0.0.9:8777":  "127.0.0.9", // the local node: pods share the host's loopback
		":8777":           "127.0.0.1",
	} {
		if got := kernelIP(listen); got != want {
			t.Errorf("kernelIP(%q) = %q, want %q", listen, got, want)
		}
	}
}
