package controlplane_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nbkube/nbkube/internal/controlplane"
	"github.com/nbkube/nbkube/internal/testenv"
)

const helperEnv = "NBKUBE_CONTROLPLANE_TEST_HELPER"

func TestMain(m *testing.M) {
	// Re-executed as a helper: run a control plane until killed.
	if dir := os.Getenv(helperEnv); dir != "" {
		cp, err := controlplane.Start(context.Background(), controlplane.Config{
			BinDir: testenv.KubeBinDir(), DataDir: dir, UnsafeNoFsync: true,
		})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ready", cp.KubeconfigPath())
		select {}
	}
	os.Exit(m.Run())
}

func start(t *testing.T, dir string, kcm bool) *controlplane.ControlPlane {
	t.Helper()
	cp, err := controlplane.Start(context.Background(), controlplane.Config{
		BinDir: testenv.KubeBinDir(), DataDir: dir, ControllerManager: kcm, UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func TestControlPlane_StateSurvivesRestartAndDataDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	cp := start(t, dir, false)

	if _, err := controlplane.Start(context.Background(), controlplane.Config{
		BinDir: testenv.KubeBinDir(), DataDir: dir,
	}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second control plane on the same data dir: got %v, want an in-use error", err)
	}

	// The kubeconfig on disk is what kubectl users get; use it rather than RESTConfig.
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"}, Data: map[string]string{"a": "b"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}

	cp = start(t, dir, false)
	defer cp.Stop()
	cs = kubernetes.NewForConfigOrDie(cp.RESTConfig())
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap lost across a restart: %v", err)
	}
	if got.Data["a"] != "b" {
		t.Errorf("ConfigMap data = %v", got.Data)
	}
}

func TestControlPlane_TwoInstancesSideBySideWithControllerManager(t *testing.T) {
	a := testenv.ControlPlane(t, true)
	b := testenv.ControlPlane(t, false)
	if a.RESTConfig().Host == b.RESTConfig().Host {
		t.Fatalf("both control planes at %s", a.RESTConfig().Host)
	}
	ctx := context.Background()
	// The controller manager's service-account controller has run (Start waits for it), and
	// the token controller publishes the root CA for pods.
	csA := kubernetes.NewForConfigOrDie(a.RESTConfig())
	testenv.Eventually(t, "kube-root-ca.crt to be published", 30*time.Second, func() error {
		_, err := csA.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	csB := kubernetes.NewForConfigOrDie(b.RESTConfig())
	if _, err := csB.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestControlPlane_ChildrenDieWhenNbkubeIsKilled(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		cmd.Process.Kill()
		t.Fatalf("helper: %q %v", line, err)
	}
	children := testenv.Descendants(cmd.Process.Pid)
	if len(children) != 2 {
		cmd.Process.Kill()
		t.Fatalf("helper children = %v, want etcd and kube-apiserver", children)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	testenv.Eventually(t, "the children to die with their parent", 10*time.Second, func() error {
		for _, pid := range children {
			if testenv.Alive(pid) {
				return fmt.Errorf("child %d outlived its killed parent", pid)
			}
		}
		return nil
	})
	// The lock went with the process: the data dir is usable again.
	start(t, dir, false).Stop()
}

func TestControlPlane_AFailedStartStopsWhatItStartedAndFreesTheDataDir(t *testing.T) {
	dir := t.TempDir()
	refused := errors.New("refused by the test")
	_, err := controlplane.Start(context.Background(), controlplane.Config{
		BinDir: testenv.KubeBinDir(), DataDir: dir, ControllerManager: true, UnsafeNoFsync: true,
		BeforeControllerManager: func(context.Context, *rest.Config) error { return refused },
	})
	if !errors.Is(err, refused) {
		t.Fatalf("Start = %v, want the hook's error", err)
	}
	// etcd and the API server are gone and the directory is free: a new start gets them back.
	cp := start(t, dir, true)
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
}

// The controller manager runs a chosen few controllers; these are the ones nbkube's objects
// need: owners' deletions reach what they own, and Deployments (the reStructuredText
// renderer's) get their ReplicaSet and pods.
func TestControlPlane_ControllerManagerCollectsGarbageAndRunsDeployments(t *testing.T) {
	cp := testenv.ControlPlane(t, true)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := context.Background()
	owner, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID},
	}}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, owned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the owned ConfigMap to be collected", time.Minute, func() error {
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "owned", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})

	labels := map[string]string{"app": "d"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}},
		}},
	}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Deployment's pod", time.Minute, func() error {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=d"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
}
