package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/daskcluster"
)

// clusterDaskReport is the "Dask clusters on a real cluster" section: dask clusters of
// daskWorkers workers through the chart against bare pods of the same image.
type clusterDaskReport struct {
	node, version string
	// ready: POST /api/clusters until the API says the workers are registered; client: until
	// a notebook attached to the cluster returned from wait_for_workers; floor: bare pods
	// until their scheduler said the workers were registered. Sorted.
	ready, client, floor []time.Duration
	errs                 []error
}

// clusterDaskStarts is the number of starts of each column: a dask start holds three pods
// for seconds, so fewer than kernels' twenty.
const clusterDaskStarts = 10

func measureClusterDask(cfg clusterConfig) *clusterDaskReport {
	rep := &clusterDaskReport{}
	fail := func(err error) *clusterDaskReport {
		rep.errs = append(rep.errs, err)
		fmt.Fprintln(os.Stderr, "bench: cluster dask:", err)
		return rep
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := setUpBench(ctx, cfg, &rep.version, &rep.node)
	defer b.cleanup()
	if err != nil {
		return fail(err)
	}
	api := &kernelClient{s: b.api.s, hc: &http.Client{Timeout: daskTimeout}}
	// One of each first: the first pays for caches the others find warm.
	if _, _, err := daskStart(api, "bench-warm", true); err != nil {
		return fail(fmt.Errorf("warm-up dask cluster: %w", err))
	}
	if _, err := daskFloor(ctx, b.cs, cfg.kernelImage, "dask-floor-warm"); err != nil {
		return fail(fmt.Errorf("warm-up floor: %w", err))
	}
	for i := range clusterDaskStarts {
		ready, client, err := daskStart(api, fmt.Sprintf("bench-%d", i), true)
		if err != nil {
			return fail(fmt.Errorf("dask cluster %d: %w", i, err))
		}
		f, err := daskFloor(ctx, b.cs, cfg.kernelImage, fmt.Sprintf("dask-floor-%d", i))
		if err != nil {
			return fail(fmt.Errorf("floor %d: %w", i, err))
		}
		rep.ready, rep.client, rep.floor = append(rep.ready, ready), append(rep.client, client), append(rep.floor, f)
		fmt.Fprintf(os.Stderr, "cluster  dask %2d: workers registered %6.0f ms, wait_for_workers returned %6.0f ms; floor %6.0f ms\n", i, ms(ready), ms(client), ms(f))
	}
	for _, v := range [][]time.Duration{rep.ready, rep.client, rep.floor} {
		slices.Sort(v)
	}
	return rep
}

// daskFloor makes what a dask cluster of daskWorkers workers is without nbkube, in bare pods
// of the kernel image with the same user, security context and TLS as nbkube's: a Secret of
// the TLS files, a Service, the scheduler's pod and its workers' pods, all at once (the
// workers find the scheduler through the Service as soon as it listens). It returns the time
// from the first creation until the scheduler's own HTTP route says the workers registered,
// read from this host as nbkube's manager reads it, and deletes everything.
func daskFloor(ctx context.Context, cs kubernetes.Interface, image, name string) (time.Duration, error) {
	creds, err := daskcluster.NewCredentials(rand.Reader, name, time.Now())
	if err != nil {
		return 0, err
	}
	const secretDir = "/etc/dask-floor"
	labels := map[string]string{"nbkube-bench": "floor", "dask-floor": name}
	schedLabels := map[string]string{"nbkube-bench": "floor", "dask-floor": name, "role": "scheduler"}
	address := "tls://" + net.JoinHostPort(fmt.Sprintf("%s.%s.svc", name, benchNamespace), strconv.Itoa(daskcluster.SchedulerPort))
	tls := []string{"--tls-ca-file=" + secretDir + "/ca.crt", "--tls-cert=" + secretDir + "/tls.crt", "--tls-key=" + secretDir + "/tls.key"}
	pod := func(podName string, l map[string]string, argv []string) *corev1.Pod {
		p := floorPod(image, podName, "", false)
		p.Labels = l
		c := &p.Spec.Containers[0]
		c.Command, c.WorkingDir = argv, "/tmp"
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			corev1.EnvVar{Name: "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION", Value: "True"},
			corev1.EnvVar{Name: "DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES", Value: daskcluster.HTTPRoutes})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: secretDir, ReadOnly: true})
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: name, DefaultMode: ptr.To[int32](0o440)}}})
		p.Spec.SecurityContext.FSGroup = ptr.To[int64](100)
		return p
	}
	scheduler := pod(name+"-scheduler", schedLabels, slices.Concat([]string{"dask-scheduler", "--protocol=tls", "--host=$(POD_IP)",
		"--port=" + strconv.Itoa(daskcluster.SchedulerPort), "--dashboard-address=$(POD_IP):" + strconv.Itoa(daskcluster.HTTPPort)}, tls))
	var workers []*corev1.Pod
	for i := range daskWorkers {
		workers = append(workers, pod(fmt.Sprintf("%s-worker-%d", name, i), labels, slices.Concat([]string{"dask-worker", address,
			"--name=$(POD_NAME)", "--no-nanny", "--protocol=tls", "--host=$(POD_IP)", "--worker-port=" + strconv.Itoa(daskcluster.WorkerPort),
			"--dashboard-address=$(POD_IP):0", "--local-directory=/tmp", "--death-timeout=60"}, tls)))
		workers[i].Spec.Containers[0].Env = append(workers[i].Spec.Containers[0].Env, corev1.EnvVar{Name: "POD_NAME",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	}
	secrets, services, pods := cs.CoreV1().Secrets(benchNamespace), cs.CoreV1().Services(benchNamespace), cs.CoreV1().Pods(benchNamespace)
	defer func() {
		now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
		bg := context.Background()
		_ = pods.DeleteCollection(bg, now, metav1.ListOptions{LabelSelector: "dask-floor=" + name})
		_ = services.Delete(bg, name, now)
		_ = secrets.Delete(bg, name, now)
	}()
	t0 := time.Now()
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Data: map[string][]byte{"ca.crt": creds.CA, "tls.crt": creds.Cert, "tls.key": creds.Key}}, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	if _, err := services.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{Selector: schedLabels, Ports: []corev1.ServicePort{{Name: "scheduler", Port: daskcluster.SchedulerPort,
			TargetPort: intstr.FromInt32(daskcluster.SchedulerPort), Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	for _, p := range append([]*corev1.Pod{scheduler}, workers...) {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return 0, err
		}
	}
	hc := daskcluster.Client{HTTP: &http.Client{Timeout: 2 * time.Second}}
	var last error
	for time.Since(t0) < daskTimeout {
		time.Sleep(50 * time.Millisecond)
		p, err := pods.Get(ctx, scheduler.Name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		if p.Status.Phase == corev1.PodFailed {
			return 0, fmt.Errorf("the floor's scheduler failed: %s", p.Status.Message)
		}
		if p.Status.PodIP == "" {
			continue
		}
		st, err := hc.Query(ctx, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(daskcluster.HTTPPort)))
		if err != nil {
			last = err
			continue
		}
		if len(st.Workers) == daskWorkers {
			return time.Since(t0), nil
		}
	}
	if last == nil {
		last = errors.New("the scheduler answered with fewer workers")
	}
	return 0, fmt.Errorf("the floor's workers did not register in %v (last: %w)", daskTimeout, last)
}

func writeClusterDask(b *strings.Builder, rep *clusterDaskReport) {
	b.WriteString("## Dask clusters on a real cluster\n\n")
	fmt.Fprintf(b, "Generated by `make bench-e2e` (test/bench `-only cluster-dask`): the chart installed into the single-node cluster of `make test-e2e` (Kubernetes %s) on node %s. "+
		"nbkube, %d times: a dask cluster of %d workers ([dask.md](dask.md)) asked for with `POST /api/clusters` through the API server's Service, a notebook opened on it at once (in a cluster the scheduler's address is its Service's, known before anything runs), "+
		"until the API says the workers are registered, and until `Client().wait_for_workers(%d)` returns in that notebook. "+
		"Floor, in the same run on the same node: bare pods of the same kernel image, user, security context and TLS (a Secret, a Service, the scheduler's pod and %d workers' pods made at once), "+
		"until the scheduler's own HTTP route says the workers are registered, read from the node as nbkube's manager reads it. "+
		"Target: under 10 s (Dask Gateway's figure).\n\n", rep.version, rep.node, clusterDaskStarts, daskWorkers, daskWorkers, daskWorkers)
	if len(rep.errs) > 0 {
		fmt.Fprintf(b, "Not measured: %v\n", errors.Join(rep.errs...))
		return
	}
	fmt.Fprintf(b, "| from the request | p50 | max | p50 − floor's |\n| --- | --- | --- | --- |\n")
	row := func(name string, ds []time.Duration) {
		fmt.Fprintf(b, "| %s | %.1f s | %.1f s | %+.1f s |\n", name, p50(ds).Seconds(), ds[len(ds)-1].Seconds(), (p50(ds) - p50(rep.floor)).Seconds())
	}
	row("nbkube: workers registered (the API's `engines_ready`)", rep.ready)
	row("nbkube: `wait_for_workers` returned in the notebook", rep.client)
	row("floor: bare pods' workers registered", rep.floor)
	b.WriteString("\n")
}
