// Package testenv starts the real components that tests run against: the Kubernetes
// control plane built by hack/build-k8s.sh.
package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nbkube/nbkube/internal/controlplane"
)

// KubeVersion is the Kubernetes release the tests run against; hack/build-k8s.sh and the
// Makefile pin the same.
const KubeVersion = "v1.36.3"

// KubeBinDir is where hack/build-k8s.sh put the Kubernetes binaries: $NBKUBE_KUBE_BIN_DIR,
// else $KUBEBUILDER_ASSETS, else the script's default cache.
func KubeBinDir() string {
	for _, env := range []string{"NBKUBE_KUBE_BIN_DIR", "KUBEBUILDER_ASSETS"} {
		if dir := os.Getenv(env); dir != "" {
			return dir
		}
	}
	cache := os.Getenv("NBKUBE_CACHE_DIR")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cache = filepath.Join(base, "nbkube")
	}
	return filepath.Join(cache, "k8s", KubeVersion, "bin")
}

// ControlPlane starts a throw-away control plane for the test (with kube-controller-manager
// when asked) and stops it when the test ends. Missing binaries fail the test: run
// `make k8s-bins` (or `make test`, which does).
func ControlPlane(t testing.TB, withControllerManager bool) *controlplane.ControlPlane {
	t.Helper()
	cp, err := controlplane.Start(context.Background(), controlplane.Config{
		BinDir:            KubeBinDir(),
		DataDir:           t.TempDir(),
		ControllerManager: withControllerManager,
		UnsafeNoFsync:     true,
	})
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
