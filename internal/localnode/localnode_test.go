package localnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/localnode"
	"github.com/nbkube/nbkube/internal/testenv"
)

// TestLocalNode runs the node against a real kube-apiserver and kube-controller-manager. One
// control plane and one node serve every subtest, each in its own namespace.
func TestLocalNode(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("these tests run python3 from the host PATH: install python3")
	}
	cp := testenv.ControlPlane(t, true)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dataDir, contentsDir := t.TempDir(), t.TempDir()
	startNode(t, client, localnode.Config{
		DataDir:          dataDir,
		ClaimDirs:        map[string]string{"contents": contentsDir},
		CrashLoopBackOff: 200 * time.Millisecond,
		// Longer than any test: a change reaches a running pod through the node's watch.
		VolumeResync: time.Hour,
	})
	// The shared node has started everything it runs (its informers synced, its scheduler
	// and heartbeat going) once it has scheduled and run a pod; a subtest that checks for
	// leaked goroutines then sees none of that start as its own.
	warm := createPod(t, client, basicPod(newNamespace(t, client), "warm-up", corev1.RestartPolicyNever, "true"))
	waitPod(t, client, warm, "succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })

	t.Run("RegistersAReadyNodeAndRenewsItsLease", func(t *testing.T) {
		var node *corev1.Node
		testenv.Eventually(t, "the node to be Ready", 10*time.Second, func() error {
			var err error
			node, err = client.CoreV1().Nodes().Get(t.Context(), localnode.DefaultNodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(node) {
				return fmt.Errorf("not Ready, conditions %+v", node.Status.Conditions)
			}
			return nil
		})
		if node.Labels[corev1.LabelHostname] != localnode.DefaultNodeName || node.Labels[corev1.LabelOSStable] != "linux" {
			t.Errorf("node labels = %v", node.Labels)
		}
		if node.Status.Allocatable.Pods().Value() != 110 || node.Status.Allocatable.Cpu().IsZero() || node.Status.Allocatable.Memory().IsZero() {
			t.Errorf("allocatable = %v", node.Status.Allocatable)
		}
		if node.Status.NodeInfo.KubeletVersion != localnode.DefaultKubeletVersion {
			t.Errorf("kubelet version = %q", node.Status.NodeInfo.KubeletVersion)
		}
		// The lease is made beside the node's status, not before it.
		var lease *coordinationv1.Lease
		testenv.Eventually(t, "the node's lease", 10*time.Second, func() error {
			var err error
			lease, err = client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(t.Context(), localnode.DefaultNodeName, metav1.GetOptions{})
			return err
		})
		if lease.Spec.RenewTime == nil || time.Since(lease.Spec.RenewTime.Time) > time.Minute {
			t.Errorf("lease renewed at %v", lease.Spec.RenewTime)
		}
	})

	// Its own node, so that the shared one's pods never lose theirs.
	t.Run("ANodeDeletedByHandRegistersAgainAtItsNextLeaseRenewal", func(t *testing.T) {
		cfg := localnode.Config{NodeName: "nbkube-deleted", DataDir: t.TempDir()}
		defer startNode(t, client, cfg)()
		nodes, leases := client.CoreV1().Nodes(), client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		var first *corev1.Node
		testenv.Eventually(t, "the node and its lease", 10*time.Second, func() error {
			var err error
			if first, err = nodes.Get(t.Context(), cfg.NodeName, metav1.GetOptions{}); err != nil {
				return err
			}
			_, err = leases.Get(t.Context(), cfg.NodeName, metav1.GetOptions{})
			return err
		})
		if err := nodes.Delete(t.Context(), cfg.NodeName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// What the garbage collector does after the node goes.
		if err := leases.Delete(t.Context(), cfg.NodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		// The status is reported every five minutes; the lease every ten seconds.
		testenv.Eventually(t, "the node registered again, Ready", 15*time.Second, func() error {
			node, err := nodes.Get(t.Context(), cfg.NodeName, metav1.GetOptions{})
			switch {
			case err != nil:
				return err
			case node.UID == first.UID:
				return errors.New("still the deleted node")
			case !nodeReady(node):
				return fmt.Errorf("not Ready, conditions %+v", node.Status.Conditions)
			}
			return nil
		})
	})

	// Sequential: it stops and restarts a node of its own while the shared one runs.
	t.Run("RestartedNodeRestartsAlwaysPodsAndFailsNeverPods", func(t *testing.T) {
		ns := newNamespace(t, client)
		// Nothing else runs meanwhile, so every goroutine the two node runs start must be gone.
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		cfg := localnode.Config{NodeName: "nbkube-restart", DataDir: t.TempDir(), CrashLoopBackOff: 200 * time.Millisecond}
		stop := startNode(t, client, cfg)
		sleeper := func(name string, policy corev1.RestartPolicy) *corev1.Pod {
			p := basicPod(ns, name, policy, "sleep", "300")
			p.Spec.NodeName = cfg.NodeName
			return p
		}
		always := createPod(t, client, sleeper("always", corev1.RestartPolicyAlways))
		never := createPod(t, client, sleeper("never", corev1.RestartPolicyNever))
		alwaysPID := pidOf(t, waitPod(t, client, always, "running", podRunning))
		neverPID := pidOf(t, waitPod(t, client, never, "running", podRunning))

		stop()
		for _, pid := range []int{alwaysPID, neverPID} {
			if testenv.Alive(pid) {
				t.Errorf("process %d outlived its node", pid)
			}
		}

		stop = startNode(t, client, cfg)
		restarted := waitPod(t, client, always, "restarted", func(p *corev1.Pod) bool {
			return podRunning(p) && p.Status.ContainerStatuses[0].RestartCount == 1
		})
		if last := restarted.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.Reason != "ContainerStatusUnknown" {
			t.Errorf("last termination = %+v", last)
		}
		failed := waitPod(t, client, never, "failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if failed.Status.Reason != "NodeRestarted" || !strings.Contains(failed.Status.Message, "restarted") {
			t.Errorf("failed pod: reason %q, message %q", failed.Status.Reason, failed.Status.Message)
		}
		deletePod(t, client, restarted)
		deletePod(t, client, failed)
		stop()
	})

	t.Run("PodServesOnItsPodIPAndItsProcessDiesWithIt", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		pod := createPod(t, client, serverPod(ns, "web"))
		pod = waitPod(t, client, pod, "ready", podReady)

		ip := pod.Status.PodIP
		if !strings.HasPrefix(ip, "127.") || ip == "127.0.0.1" || pod.Status.HostIP != "127.0.0.1" {
			t.Errorf("pod IP %q, host IP %q", ip, pod.Status.HostIP)
		}
		if got := httpGet(t, ip); got != "hello from "+ip {
			t.Errorf("GET answered %q", got)
		}
		if c := pod.Status.Conditions; len(c) == 0 || pod.Status.QOSClass != corev1.PodQOSBestEffort || pod.Status.StartTime == nil {
			t.Errorf("status = %+v", pod.Status)
		}
		expectEvent(t, client, pod, "Scheduled")
		expectEvent(t, client, pod, "Started")

		pid := pidOf(t, pod)
		podDir := filepath.Join(dataDir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
		if _, err := os.Stat(podDir); err != nil {
			t.Errorf("pod directory: %v", err)
		}
		deletePod(t, client, pod)
		if testenv.Alive(pid) {
			t.Errorf("process %d survived the deletion of its pod", pid)
		}
		if _, err := os.Stat(podDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pod directory left behind: %v", err)
		}
	})

	t.Run("ForceDeletedPodHasItsProcessKilled", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		pod := createPod(t, client, basicPod(ns, "sleeper", corev1.RestartPolicyAlways, "sleep", "300"))
		pid := pidOf(t, waitPod(t, client, pod, "running", podRunning))
		if err := client.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the process to die", 10*time.Second, func() error {
			if testenv.Alive(pid) {
				return fmt.Errorf("process %d is alive", pid)
			}
			return nil
		})
	})

	t.Run("DeploymentReplicasRunOnDistinctPodIPs", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		template := serverPod(ns, "")
		labels := map[string]string{"app": "web"}
		template.Labels = labels
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta, Spec: template.Spec},
			},
		}
		if _, err := client.AppsV1().Deployments(ns).Create(context.Background(), deploy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "two ready replicas", 30*time.Second, func() error {
			d, err := client.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Status.ReadyReplicas != 2 {
				return fmt.Errorf("%d ready", d.Status.ReadyReplicas)
			}
			return nil
		})
		pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		ips := map[string]bool{}
		for _, p := range pods.Items {
			if !podReady(&p) {
				t.Errorf("pod %s is not ready", p.Name)
			}
			ips[p.Status.PodIP] = true
			if got := httpGet(t, p.Status.PodIP); got != "hello from "+p.Status.PodIP {
				t.Errorf("pod %s answered %q", p.Name, got)
			}
		}
		if len(pods.Items) != 2 || len(ips) != 2 {
			t.Errorf("%d pods on %d distinct IPs, want 2 on 2", len(pods.Items), len(ips))
		}
	})

	t.Run("FailingCommandUnderNeverFailsThePodWithItsExitCodeAndLog", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		p := basicPod(ns, "broken", corev1.RestartPolicyNever, "sh", "-c", "echo something broke >&2; exit 3")
		p.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		pod := waitPod(t, client, createPod(t, client, p), "failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		term := pod.Status.ContainerStatuses[0].State.Terminated
		if term == nil || term.ExitCode != 3 || term.Reason != "Error" || term.Message != "something broke" {
			t.Errorf("terminated state = %+v", term)
		}
	})

	t.Run("InitContainerRunsFirstAndSharesAnEmptyDir", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		p := basicPod(ns, "init", corev1.RestartPolicyNever, "sh", "-c", `cat "$GREETING" > /dev/stdout; cat "$GREETING" > "$MSG"`)
		env := []corev1.EnvVar{{Name: "GREETING", Value: "/work/greeting"}, {Name: "MSG", Value: "/work/msg"}}
		mounts := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		p.Spec.InitContainers = []corev1.Container{{
			Name: "setup", Image: "busybox:1.36", Env: env, VolumeMounts: mounts,
			Command: []string{"sh", "-c", `echo written by init > "$GREETING"`},
		}}
		c := &p.Spec.Containers[0]
		c.Env, c.VolumeMounts, c.TerminationMessagePath = env, mounts, "/work/msg"
		pod := waitPod(t, client, createPod(t, client, p), "succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		if init := pod.Status.InitContainerStatuses[0].State.Terminated; init == nil || init.ExitCode != 0 {
			t.Errorf("init container state = %+v", pod.Status.InitContainerStatuses[0].State)
		}
		if term := pod.Status.ContainerStatuses[0].State.Terminated; term == nil || strings.TrimSpace(term.Message) != "written by init" {
			t.Errorf("main container state = %+v", pod.Status.ContainerStatuses[0].State)
		}
	})

	t.Run("SecretVolumeSecretEnvAndServiceAccountTokenReachTheProcess", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			Data:       map[string][]byte{"password": []byte("hunter2"), "token": []byte("s3cr3t")},
		}
		if _, err := client.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
		p := basicPod(ns, "secrets", corev1.RestartPolicyNever, "sh", "-c",
			`printf '%s|%s|%s|%s|%s' "$TOKEN" "$(cat "$1")" "$(stat -c %a "$1")" "$(cat "$3")" "$(test -s "$4" && echo token)" > "$2"`,
			"sh", "/etc/creds/pw", "/out/msg", sa+"/namespace", sa+"/token")
		p.Spec.Volumes = []corev1.Volume{
			{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "db", Items: []corev1.KeyToPath{{Key: "password", Path: "pw", Mode: ptr.To[int32](0o400)}}}}},
			{Name: "out", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/etc/creds"}, {Name: "out", MountPath: "/out"}}
		c.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "token"}}}}
		c.TerminationMessagePath = "/out/msg"
		pod := waitPod(t, client, createPod(t, client, p), "succeeded", func(p *corev1.Pod) bool { return terminal(p) })
		term := pod.Status.ContainerStatuses[0].State.Terminated
		want := "s3cr3t|hunter2|400|" + ns + "|token"
		if pod.Status.Phase != corev1.PodSucceeded || term == nil || term.Message != want {
			t.Errorf("phase %s, terminated state %+v; want message %q", pod.Status.Phase, term, want)
		}
	})

	// As with the kubelet, a running pod sees its Secret change, including an optional key
	// that was missing when it started; the node's watch brings the change, not its resync.
	t.Run("ChangedSecretReachesARunningPodsVolume", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "conn", Namespace: ns}, Data: map[string][]byte{"other": []byte("x")}}
		if _, err := client.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := basicPod(ns, "follower", corev1.RestartPolicyNever, "sh", "-c",
			`until [ "$(cat "$1" 2>/dev/null)" = new ]; do sleep 0.1; done`, "sh", "/etc/conn/file")
		p.Spec.Volumes = []corev1.Volume{{Name: "conn", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "conn", Optional: ptr.To(true), Items: []corev1.KeyToPath{{Key: "file", Path: "file"}}}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "conn", MountPath: "/etc/conn"}}
		pod := waitPod(t, client, createPod(t, client, p), "running", podRunning)
		secret.Data["file"] = []byte("new")
		if _, err := client.CoreV1().Secrets(ns).Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if pod = waitPod(t, client, pod, "succeeded", terminal); pod.Status.Phase != corev1.PodSucceeded {
			t.Errorf("phase %s: %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
		}
	})

	t.Run("ClaimDataIsWrittenToItsClaimDirAndOutlivesThePod", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		p := basicPod(ns, "writer", corev1.RestartPolicyNever, "sh", "-c", `echo saved > note.txt`)
		p.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "contents"}}}}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/home/jovyan/work", SubPath: ns}}
		c.WorkingDir = "/home/jovyan/work"
		pod := waitPod(t, client, createPod(t, client, p), "succeeded", terminal)
		if pod.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("phase %s: %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
		}
		deletePod(t, client, pod)
		b, err := os.ReadFile(filepath.Join(contentsDir, ns, "note.txt"))
		if err != nil || string(b) != "saved\n" {
			t.Errorf("the claim directory holds %q, %v", b, err)
		}
	})

	t.Run("PodWithoutCommandFails", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		p := basicPod(ns, "imageonly", corev1.RestartPolicyAlways)
		pod := waitPod(t, client, createPod(t, client, p), "failed", terminal)
		if pod.Status.Phase != corev1.PodFailed || pod.Status.Reason != "NoCommand" || !strings.Contains(pod.Status.Message, "no command") {
			t.Errorf("phase %s, reason %q, message %q", pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
		}
		expectEvent(t, client, pod, "NoCommand")
	})

	t.Run("UnmatchedNodeSelectorLeavesThePodUnschedulableUntilTheNodeIsLabelled", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		p := basicPod(ns, "picky", corev1.RestartPolicyAlways, "sleep", "300")
		const label = "test.nbkube.io/disktype"
		p.Spec.NodeSelector = map[string]string{label: "ssd"}
		pod := waitPod(t, client, createPod(t, client, p), "unschedulable", func(p *corev1.Pod) bool {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					return strings.Contains(c.Message, "didn't match Pod's node affinity/selector")
				}
			}
			return false
		})
		if pod.Spec.NodeName != "" {
			t.Errorf("pod bound to %s", pod.Spec.NodeName)
		}
		expectEvent(t, client, pod, "FailedScheduling")

		// As with kube-scheduler, labelling the node places the pod at once, well before the
		// minute after which an unschedulable pod is tried again anyway.
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"ssd"}}}`, label)
		if _, err := client.CoreV1().Nodes().Patch(context.Background(), localnode.DefaultNodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			unlabel := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, label)
			_, _ = client.CoreV1().Nodes().Patch(context.Background(), localnode.DefaultNodeName, types.MergePatchType, []byte(unlabel), metav1.PatchOptions{})
		})
		testenv.Eventually(t, "the pod to be bound once the node has the label", 10*time.Second, func() error {
			p, err := client.CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Spec.NodeName != localnode.DefaultNodeName {
				return fmt.Errorf("on node %q", p.Spec.NodeName)
			}
			return nil
		})
	})

	t.Run("CrashingContainerIsRestartedWithBackOff", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		pod := createPod(t, client, basicPod(ns, "crasher", corev1.RestartPolicyOnFailure, "sh", "-c", "exit 1"))
		pod = waitPod(t, client, pod, "restarted twice", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
		})
		last := pod.Status.ContainerStatuses[0].LastTerminationState.Terminated
		if pod.Status.Phase != corev1.PodRunning || last == nil || last.ExitCode != 1 {
			t.Errorf("phase %s, last termination %+v", pod.Status.Phase, last)
		}
		expectEvent(t, client, pod, "BackOff")
	})

	t.Run("FailingLivenessProbeRestartsTheContainer", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, client)
		p := basicPod(ns, "unwell", corev1.RestartPolicyAlways, "sleep", "300")
		p.Spec.Containers[0].LivenessProbe = &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "exit 1"}}},
			PeriodSeconds:    1,
			FailureThreshold: 1,
		}
		pod := waitPod(t, client, createPod(t, client, p), "restarted", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
		})
		expectEvent(t, client, pod, "Unhealthy")
		expectEvent(t, client, pod, "Killing")
	})
}
