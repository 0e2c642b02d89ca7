// Package testenv starts the real components that tests run against: the Kubernetes
// control plane built by hack/build-k8s.sh.
package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/nbkube/nbkube/internal/controlplane"
)

// KubeBinDir is where the Kubernetes binaries are: controlplane.DefaultBinDir.
func KubeBinDir() string { return controlplane.DefaultBinDir(os.Getenv) }

// ControlPlane starts a throw-away control plane for the test (with kube-controller-manager
// when asked), as nbkube local runs it, and stops it when the test ends. Missing binaries fail
// the test: run `make k8s-bins` (or `make test`, which does).
func ControlPlane(t testing.TB, withControllerManager bool) *controlplane.ControlPlane {
	t.Helper()
	return startControlPlane(t, controlplane.Config{ControllerManager: withControllerManager})
}

// ClusterControlPlane is ControlPlane without kube-controller-manager, serving every API
// group as a cluster's API server does: for tests that stand for a cluster, such as the
// chart's, whose objects include kinds nbkube local has no use for (its cleanup Job).
func ClusterControlPlane(t testing.TB) *controlplane.ControlPlane {
	t.Helper()
	return startControlPlane(t, controlplane.Config{AllAPIGroups: true})
}

func startControlPlane(t testing.TB, cfg controlplane.Config) *controlplane.ControlPlane {
	t.Helper()
	cfg.BinDir, cfg.DataDir, cfg.UnsafeNoFsync = KubeBinDir(), t.TempDir(), true
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

// Missing stops a test whose real component is not installed: it is skipped on a developer's
// machine, but fails under CI (CI=true), which installs everything: a comparison or a provider
// test that silently stopped running there would pass for ever.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
