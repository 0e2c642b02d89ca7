//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// A release of its own, beside TestHelm_InARealCluster's: its users are those of a users
// file, and what it checks is the kubelet's update of a mounted Secret, which the other
// release's upgrade (a new pod) would not exercise.
const (
	usersNamespace     = "nbkube-e2e-users"
	usersRelease       = "nbu"
	usersContentsClass = "nbkube-e2e-users-contents"
	// usersSecretApplied bounds how long a changed users Secret takes to apply: the kubelet's
	// next sync of the pod (hack/cluster.sh shortens its period), the users file's check
	// interval, then the identity cache's TTL for a token it already knew.
	usersSecretApplied = 2 * time.Minute
)

// TestHelm_UsersSecretChangesApplyWithoutARestart installs the chart with the users provider:
// each user sees only their own kernels and the file's admin sees everyone's with owners;
// each user's kernel sees only their home, ann's on a claim of her own, ben's on the contents
// volume (claims per user on, ann's made, his not). Then the users Secret changes, as an admin would change it with kubectl: one user's token
// rotates and another is removed. The kubelet swaps the mounted file and the same API server
// pod, not restarted, refuses the old token and the removed user, takes the new token, and
// closes the WebSocket the old token opened.
func TestHelm_UsersSecretChangesApplyWithoutARestart(t *testing.T) {
	env := newHelmEnv(t)
	ctx := t.Context()
	c := env.client

	tokens := map[string]string{}
	for _, name := range []string{"ann", "ben", "root"} {
		tokens[name] = newUsersToken(t, name)
	}
	values := usersValues(t, tokens, "root")
	contents := filepath.Join(filepath.Dir(env.contentsDir), "users-notebooks")
	env.contentsVolume(t, usersContentsClass, contents)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: usersNamespace}}); err != nil {
		t.Fatal(err)
	}
	// ann has a claim of her own, a volume of her home's directory alone, as an admin would
	// make one per user (an NFS export of the home, say); ben has none and keeps his home's
	// subPath of the contents volume.
	env.homeClaim(t, "ann", filepath.Join(contents, "ann"))
	t.Cleanup(func() {
		// Uninstalled so that the release's kernels go before the namespace does.
		_ = exec.Command(env.helm, "uninstall", usersRelease, "--namespace", usersNamespace, "--wait", "--timeout", "2m").Run()
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: usersNamespace}})
	})
	// One replica: the assertions after the Secret's change are about the pod the kubelet
	// updates, and a second one would only make the Service's answers depend on its turn.
	env.run(t, env.helm, env.helmArgsOf(usersRelease, usersNamespace, "install",
		"--set", "contents.storageClass="+usersContentsClass, "--set", "apiserver.replicas=1",
		"--set", "contents.homeClaim=home-{username}", "-f", values)...)

	base := env.serviceURL(t, usersRelease, usersNamespace)
	as := func(name string) *jupyterAPI { return newJupyterAPI(base, tokens[name], 5*time.Minute) }
	waitAPI(t, as("root"))
	pod := usersAPIServerPod(t, env)

	start := time.Now()
	ann, ben := as("ann").startKernel(t), as("ben").startKernel(t)
	t.Logf("two kernels started in %.1fs", time.Since(start).Seconds())
	as("ann").call(t, http.MethodGet, "api/kernels/"+ben, nil).want(t, http.StatusNotFound)
	as("ben").call(t, http.MethodGet, "api/kernels/"+ann, nil).want(t, http.StatusNotFound)
	if got := kernelOwners(t, as("ann")); !slices.Equal(got, []string{ann + "=ann"}) {
		t.Errorf("ann lists %v", got)
	}
	if got, want := kernelOwners(t, as("root")), slices.Sorted(slices.Values([]string{ann + "=ann", ben + "=ben"})); !slices.Equal(got, want) {
		t.Errorf("the admin lists %v, want %v", got, want)
	}
	checkClusterAdmitsOnlyItsOwner(t, env, ann, ben)
	checkDaskAdmitsOnlyItsOwner(t, env, ann, ben)
	checkHomeMounts(t, env, map[string]string{ann: "home-ann/", ben: usersRelease + "-nbkube-contents/ben"})
	annWS := dialJupyterWS(t, as("ann"), "api/kernels/"+ann+"/channels", "")
	checkKernelSeesOnlyItsHome(t, as("ann"), as("ben"), annWS)
	// Both ways: what her kernel writes on her claim, the API serves from her home.
	runCell(t, annWS, "open('from-kernel.txt', 'w').write('on her claim')")
	as("ann").call(t, http.MethodGet, "api/contents/from-kernel.txt", nil).want(t, http.StatusOK)

	// ann's token rotates and ben goes, in the Secret the chart made.
	oldAnn, oldBen := tokens["ann"], tokens["ben"]
	tokens["ann"] = newUsersToken(t, "ann")
	delete(tokens, "ben")
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: usersNamespace, Name: usersRelease + "-nbkube-users"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["users.yaml"] = usersFile(t, tokens, "root")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	t.Logf("users Secret updated at %s", changed.UTC().Format("15:04:05.000"))
	wsClosed := make(chan time.Duration, 1)
	go func() { <-annWS.Ended(); wsClosed <- time.Since(changed) }()

	// A token the server has not seen is answered from the file, so the new one's first 200
	// tells when the kubelet's swap reached the server (within the file's check interval and
	// the negative cache's TTL).
	waitStatus(t, as("ann"), http.StatusOK, "ann's new token works")
	t.Logf("ann's new token works %.1fs after the Secret changed", time.Since(changed).Seconds())
	waitStatus(t, newJupyterAPI(base, oldAnn, time.Minute), http.StatusForbidden, "ann's old token is refused")
	waitStatus(t, newJupyterAPI(base, oldBen, time.Minute), http.StatusForbidden, "ben's token is refused")
	t.Logf("ann's old token and ben's refused %.1fs after the Secret changed", time.Since(changed).Seconds())
	select {
	case after := <-wsClosed:
		if !websocket.IsCloseError(annWS.Err(), websocket.ClosePolicyViolation) {
			t.Errorf("the WebSocket of ann's old token ended with %v, want a policy-violation close", annWS.Err())
		}
		t.Logf("the WebSocket of ann's old token closed %.1fs after the Secret changed", after.Seconds())
	case <-time.After(usersSecretApplied - time.Since(changed)):
		t.Error("the WebSocket of ann's old token is still open")
	}
	as("ann").call(t, http.MethodGet, "api/kernels/"+ann, nil).want(t, http.StatusOK)
	as("root").call(t, http.MethodGet, "api/kernels/"+ben, nil).want(t, http.StatusOK)

	if now := usersAPIServerPod(t, env); now.UID != pod.UID || restarts(now) != restarts(pod) {
		t.Errorf("the API server pod was replaced or restarted: %s (%d restarts), was %s (%d)", now.UID, restarts(now), pod.UID, restarts(pod))
	}
}

// newUsersToken is a new token of the users provider for the user, as `nbkube users token`
// makes it.
func newUsersToken(t *testing.T, name string) string {
	t.Helper()
	tok, err := identity.NewUserToken(name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// usersFile is the content of a users file of the users with these tokens, admins among them.
func usersFile(t *testing.T, tokens map[string]string, admins ...string) []byte {
	t.Helper()
	var f identity.UsersFileContent
	for _, name := range slices.Sorted(maps.Keys(tokens)) {
		h, err := identity.HashSecret(tokens[name])
		if err != nil {
			t.Fatal(err)
		}
		f.Users = append(f.Users, identity.UsersFileEntry{Name: name, Admin: slices.Contains(admins, name), TokenHash: h})
	}
	data, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// usersValues is a values file that turns the users provider on, alone, with these users.
func usersValues(t *testing.T, tokens map[string]string, admins ...string) string {
	t.Helper()
	var f identity.UsersFileContent
	if err := yaml.Unmarshal(usersFile(t, tokens, admins...), &f); err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(map[string]any{"auth": map[string]any{"type": []string{identity.KindUsers}, "users": map[string]any{"list": f.Users}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// kernelOwners lists the kernels the client sees as id=owner, sorted.
func kernelOwners(t *testing.T, api *jupyterAPI) []string {
	t.Helper()
	var list []struct{ ID, Owner string }
	api.getJSON(t, "api/kernels", &list)
	out := make([]string, 0, len(list))
	for _, k := range list {
		out = append(out, k.ID+"="+k.Owner)
	}
	slices.Sort(out)
	return out
}

// waitStatus waits until GET /api/kernels with the client's token answers status.
func waitStatus(t *testing.T, api *jupyterAPI, status int, what string) {
	t.Helper()
	testenv.Eventually(t, what, usersSecretApplied, func() error {
		if r := api.call(t, http.MethodGet, "api/kernels", nil); r.status != status {
			return errors.New(http.StatusText(r.status))
		}
		return nil
	})
}

// usersAPIServerPod is the users release's one API server pod.
func usersAPIServerPod(t *testing.T, env *helmEnv) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.client.List(t.Context(), pods, client.InNamespace(usersNamespace), client.MatchingLabels{"app.kubernetes.io/component": "apiserver"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d API server pods, want 1", len(pods.Items))
	}
	return &pods.Items[0]
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// checkClusterAdmitsOnlyItsOwner starts a cluster of ann's and shows, under the cluster's
// NetworkPolicy enforcer, that her kernel reaches its ipcontroller and ben's kernel does not:
// the policy the manager makes for each cluster admits only its owner's kernels (and its
// engines). Ben's kernel does not reach her kernel's agent either.
func checkClusterAdmitsOnlyItsOwner(t *testing.T, env *helmEnv, annKernel, benKernel string) {
	ctx := t.Context()
	c := env.client
	cl := &nbv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: usersNamespace, Name: "ann-par"},
		Spec:       nbv1.ClusterParameters{Owner: "ann", State: nbv1.ClusterRunning, Engines: 1},
	}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cl) })
	controller := &corev1.Pod{}
	testenv.Eventually(t, "ann's ipcontroller to run", clusterStartWait, func() error {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(usersNamespace),
			client.MatchingLabels{nbv1.LabelCluster: cl.Name, nbv1.LabelComponent: "ipcontroller"}); err != nil {
			return err
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				*controller = *p
				return nil
			}
		}
		return errors.New("no running ipcontroller pod")
	})
	hub := net.JoinHostPort(controller.Status.PodIP, "10101")
	pod := func(name string) *corev1.Pod {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: usersNamespace, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if ok, out := env.probe(t, pod(annKernel), hub, policyApplied); !ok {
		t.Errorf("ann's kernel did not reach her cluster's ipcontroller %s: %s", hub, out)
	}
	if ok, out := env.probe(t, pod(benKernel), hub, probeRefused); ok {
		t.Errorf("ben's kernel reached ann's cluster's ipcontroller %s: %s", hub, out)
	}
	// Nor does ben's kernel reach the agent of ann's, which takes only nbkube's servers.
	agent := net.JoinHostPort(pod(annKernel).Status.PodIP, strconv.Itoa(agentapi.Port))
	if ok, out := env.probe(t, pod(benKernel), agent, probeRefused); ok {
		t.Errorf("ben's kernel reached the agent of ann's kernel %s: %s", agent, out)
	}
}

// checkDaskAdmitsOnlyItsOwner does for a dask cluster of ann's what
// checkClusterAdmitsOnlyItsOwner does for an ipyparallel one: under the enforcer, her kernel
// reaches its scheduler (8786) and ben's kernel reaches neither it nor its worker (8788).
func checkDaskAdmitsOnlyItsOwner(t *testing.T, env *helmEnv, annKernel, benKernel string) {
	ctx := t.Context()
	c := env.client
	cl := &nbv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: usersNamespace, Name: "ann-dask"},
		Spec:       nbv1.ClusterParameters{Owner: "ann", Framework: nbv1.FrameworkDask, State: nbv1.ClusterRunning, Engines: 1},
	}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cl) })
	running := map[string]string{}
	testenv.Eventually(t, "ann's dask scheduler and worker to run", clusterStartWait, func() error {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(usersNamespace), client.MatchingLabels{nbv1.LabelCluster: cl.Name}); err != nil {
			return err
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				running[p.Labels[nbv1.LabelComponent]] = p.Status.PodIP
			}
		}
		if running["dask-scheduler"] == "" || running["dask-worker"] == "" {
			return fmt.Errorf("running: %v", running)
		}
		return nil
	})
	scheduler := net.JoinHostPort(running["dask-scheduler"], "8786")
	worker := net.JoinHostPort(running["dask-worker"], "8788")
	pod := func(name string) *corev1.Pod {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: usersNamespace, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if ok, out := env.probe(t, pod(annKernel), scheduler, policyApplied); !ok {
		t.Errorf("ann's kernel did not reach her dask scheduler %s: %s", scheduler, out)
	}
	for _, addr := range []string{scheduler, worker} {
		if ok, out := env.probe(t, pod(benKernel), addr, probeRefused); ok {
			t.Errorf("ben's kernel reached ann's dask cluster at %s: %s", addr, out)
		}
	}
}

// homeClaim makes user's own claim, home-<user>, in the users release's namespace: bound to a
// hostPath volume of dir, their home on the release's contents volume, which the API server
// makes before the user's first kernel.
func (e *helmEnv) homeClaim(t *testing.T, user, dir string) {
	t.Helper()
	ctx := t.Context()
	name := "home-" + user
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: usersNamespace + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: usersNamespace, Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: dir, Type: ptr.To(corev1.HostPathDirectory)}},
		},
	}
	if err := e.client.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Delete(context.Background(), pv) })
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: usersNamespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: ptr.To(""),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := e.client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
}

// checkHomeMounts checks what each kernel's pod mounts at the contents' place, as
// "<claim>/<subPath>".
func checkHomeMounts(t *testing.T, env *helmEnv, want map[string]string) {
	t.Helper()
	for id, w := range want {
		pod := &corev1.Pod{}
		if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: usersNamespace, Name: id}, pod); err != nil {
			t.Fatal(err)
		}
		var claim, sub string
		for _, v := range pod.Spec.Volumes {
			if v.Name == "contents" && v.PersistentVolumeClaim != nil {
				claim = v.PersistentVolumeClaim.ClaimName
			}
		}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.Name == "contents" {
				sub = m.SubPath
			}
		}
		if got := claim + "/" + sub; got != w {
			t.Errorf("kernel %s's pod mounts %s, want %s", id, got, w)
		}
	}
}

// checkKernelSeesOnlyItsHome saves a file as ann and one as ben through the API, each in their
// home on the one volume, and shows that ann's kernel, in its pod, sees her file and not his:
// its pod mounts only her home, and nothing in the pod leads to the volume's other homes.
func checkKernelSeesOnlyItsHome(t *testing.T, ann, ben *jupyterAPI, annWS *jupyterWS) {
	for api, name := range map[*jupyterAPI]string{ann: "ann-notes.txt", ben: "ben-notes.txt"} {
		api.call(t, http.MethodPut, "api/contents/"+name, map[string]string{"type": "file", "format": "text", "content": name}).want(t, http.StatusCreated)
	}
	e := runCell(t, annWS, `import os
seen = set()
for top in ('.', '/'):
    for d, dirs, files in os.walk(top, onerror=lambda e: None):
        dirs[:] = [x for x in dirs if not (d == '/' and x in ('proc', 'sys', 'dev'))]
        seen.update(f for f in files if f.endswith('-notes.txt'))
print(sorted(x for x in os.listdir('.') if not x.startswith('.')), sorted(seen))`)
	if got, want := strings.TrimSpace(e.Stdout.String()), "['ann-notes.txt'] ['ann-notes.txt']"; got != want {
		t.Errorf("ann's kernel sees %s, want %s (only her home)", got, want)
	}
}
