// Package chart_test checks the Helm chart without a cluster of nodes: helm lint, the values
// schema, and every rendered object created with a server-side dry run against a real
// kube-apiserver, which validates it against Kubernetes' own schemas and nbkube's CRDs.
package chart_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

const chartDir = "../../charts/nbkube"

// helm runs the pinned helm that `make test` installs.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	readChart(t)
	bin := os.Getenv("NBKUBE_HELM")
	if bin == "" {
		t.Fatal("NBKUBE_HELM is not set: run the tests with make test, which installs helm")
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errors.New(errOut.String())
	}
	return out.String(), nil
}

// readChart reads every file of the chart in this process: helm reads them in its own, which
// go test cannot see, and a changed template must not leave a cached result standing.
func readChart(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir(chartDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		_, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// render is `helm template` of the chart, CRDs included, split into objects.
func render(t *testing.T, namespace string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "nb", chartDir, "--namespace", namespace, "--include-crds", "--kube-version", "1.36.3"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v", sets, err)
	}
	return splitObjects(t, out)
}

// splitObjects decodes a YAML stream of objects.
func splitObjects(t *testing.T, out string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func TestChart_LintIsClean(t *testing.T) {
	out, err := helm(t, "lint", "--strict", chartDir, "--kube-version", "1.36.3")
	if err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
}

func TestChart_SchemaRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{set: "apiserver.replicas=-1", want: "/apiserver/replicas"},
		{set: "culling.idleTimeout=-5", want: "/culling/idleTimeout"},
		{set: "logFormat=text", want: "/logFormat"},
		{set: "culling.interval=5 minutes", want: "/culling/interval"},
		{set: "contents.accessModes={ReadWriteSometimes}", want: "/contents/accessModes/0"},
		{set: "kernelImagePullPolicy=Sometimes", want: "/kernelImagePullPolicy"},
		{set: "apiserver.baseURL=nb", want: "/apiserver/baseURL"},
		{set: "apiserver.trashMaxAge=30 days", want: "/apiserver/trashMaxAge"},
		{set: "apiserver.readTimeout=5 minutes", want: "/apiserver/readTimeout"},
		{set: "apiserver.deleteToTrash=maybe", want: "/apiserver/deleteToTrash"},
		{set: "kernelSpecs.Bad_Name.displayName=x", want: "/kernelSpecs"},
		// The validator names the wrong place for a bad property name, but the name itself.
		{set: "userPolicies.Bad_Name.allUsers=true", want: "invalid propertyName 'Bad_Name'"},
		{set: "userPolicies.p.limits.kernels=-1", want: "/userPolicies/p/limits/kernels"},
		{set: "replicas=3", want: "additional properties 'replicas' not allowed"},
		{set: "auth.type={saml}", want: "/auth/type/0"},
		{set: "auth.publicURL=nb.example.com", want: "/auth/publicURL"},
		{set: "auth.users.list[0].name=ann,auth.users.list[0].token_hash=plain", want: "/auth/users/list/0/token_hash"},
		{set: "auth.oidc.usernamePrefix=oidc/", want: "/auth/oidc/usernamePrefix"},
		{set: "auth.kubernetes.usernamePrefix=:k8s", want: "/auth/kubernetes/usernamePrefix"},
	} {
		_, err := helm(t, "template", "nb", chartDir, "--kube-version", "1.36.3", "--set", tc.set)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: got error %v, want one naming %q", tc.set, err, tc.want)
		}
	}
}

// TestChart_ObjectsAreValidForKubernetes creates every object of several renderings with a
// server-side dry run: the API server checks fields, enums and the CRDs' schemas.
func TestChart_ObjectsAreValidForKubernetes(t *testing.T) {
	cfg := testenv.ClusterControlPlane(t).RESTConfig()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	wantPolicies := []int{0, 0, 0, 2}
	for i, sets := range [][]string{
		nil,
		{"metrics.enabled=true", "ingress.enabled=true", "ingress.className=nginx", "quota.enabled=true",
			"quota.hard.pods=40", "contents.storageClass=-", "kernelImagePullPolicy=Never", "apiserver.replicas=3",
			"manager.replicas=2", "culling.idleTimeout=3600", "culling.interval=90s", "culling.cullBusy=true", "apiserver.baseURL=/nb/",
			"ingress.tls[0].secretName=tls", "ingress.tls[0].hosts[0]=notebooks.example.com"},
		{"auth.existingSecret=mine", "contents.existingClaim=shared", "networkPolicy.enabled=false", "cleanupOnUninstall=false",
			"apiserver.deleteToTrash=false", "apiserver.alwaysDeleteDir=true", "apiserver.trashMaxAge=24h"},
		{"auth.type={users,token}", "auth.users.list[0].name=ann", "auth.users.list[0].admin=true", "auth.users.list[0].token_hash=" + bcryptHash,
			"userPolicies.everyone.allUsers=true", "userPolicies.everyone.limits.kernels=5", "userPolicies.everyone.limits.memory=8Gi",
			"userPolicies.students.groups={students}", "userPolicies.students.kernelSpecs={python3}", "userPolicies.students.defaultResources.requests.cpu=250m"},
	} {
		ns := "chart-" + string(rune('a'+i))
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		objs := render(t, ns, sets...)
		kinds := map[string]int{}
		for _, o := range objs {
			kinds[o.GetKind()]++
			if o.GetKind() == "CustomResourceDefinition" {
				// Made for real: the chart's KernelSpecs are dry-run against them.
				if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatalf("create CRD %s: %v", o.GetName(), err)
				}
			}
		}
		// The API server serves a new CRD's kind once it is Established, and the client's
		// discovery of the group, made at its first use, must see the kinds.
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			testenv.Eventually(t, "CRD "+o.GetName()+" established", 30*time.Second, func() error {
				crd := &unstructured.Unstructured{}
				crd.SetGroupVersionKind(o.GroupVersionKind())
				if err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
					return err
				}
				conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
				for _, cond := range conds {
					if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
						return nil
					}
				}
				return fmt.Errorf("conditions %v", conds)
			})
		}
		if kinds["CustomResourceDefinition"] != 7 || kinds["Deployment"] != 2 || kinds["KernelSpec"] != 1 || kinds["UserPolicy"] != wantPolicies[i] {
			t.Errorf("%v: rendered kinds %v, want the 7 CRDs (the Terminal's too), 2 Deployments, a KernelSpec and %d UserPolicies", sets, kinds, wantPolicies[i])
		}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue
			}
			if o.GetNamespace() == "" && isNamespaced(t, c, o) {
				o.SetNamespace(ns)
			}
			err := c.Create(ctx, o, client.DryRunAll)
			if meta.IsNoMatchError(err) && o.GetKind() == "ServiceMonitor" {
				continue // the Prometheus operator's CRD is not in this API server
			}
			if err != nil {
				t.Errorf("%v: %s %s is refused: %v", sets, o.GetKind(), o.GetName(), err)
			}
		}
	}
}

// TestChart_APIServerGetsTheTrashSettings: the values reach the API server's flags (the read
// timeout's too).
func TestChart_APIServerGetsTheTrashSettings(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want []string
	}{
		{want: []string{"--delete-to-trash=true", "--always-delete-dir=false", "--trash-max-age=720h", "--read-timeout=5m"}},
		{sets: []string{"apiserver.deleteToTrash=false", "apiserver.alwaysDeleteDir=true", "apiserver.trashMaxAge=0", "apiserver.readTimeout=600"},
			want: []string{"--delete-to-trash=false", "--always-delete-dir=true", "--trash-max-age=0", "--read-timeout=600"}},
	} {
		var args []string
		for _, o := range render(t, "nb", tc.sets...) {
			if o.GetKind() == "Deployment" && o.GetName() == "nb-nbkube-apiserver" {
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				c, _ := containers[0].(map[string]any)
				args, _, _ = unstructured.NestedStringSlice(c, "args")
			}
		}
		for _, w := range tc.want {
			if !slices.Contains(args, w) {
				t.Errorf("%v: API server args %v lack %s", tc.sets, args, w)
			}
		}
	}
}

// containerArgs are the args of the first container of the named Deployment.
func containerArgs(objs []*unstructured.Unstructured, deployment string) []string {
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == deployment {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c, _ := containers[0].(map[string]any)
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			return args
		}
	}
	return nil
}

// TestChart_TerminalsValuesReachTheFlags: terminals are on by default with culling off; the
// values reach the API server's and the manager's flags.
func TestChart_TerminalsValuesReachTheFlags(t *testing.T) {
	for _, tc := range []struct {
		sets               []string
		apiserver, manager []string
		notAPIServer       string
	}{
		{apiserver: []string{"--terminals=true"}, notAPIServer: "--terminal-kernel-spec",
			manager: []string{"--terminals-cull-inactive-timeout=0", "--terminals-cull-interval=5m"}},
		{sets: []string{"terminals.enabled=false", "terminals.kernelSpec=shell", "terminals.cullInactiveTimeout=3600", "terminals.cullInterval=60"},
			apiserver: []string{"--terminals=false", "--terminal-kernel-spec=shell"},
			manager:   []string{"--terminals-cull-inactive-timeout=3600", "--terminals-cull-interval=60"}},
	} {
		objs := render(t, "nb", tc.sets...)
		api, mgr := containerArgs(objs, "nb-nbkube-apiserver"), containerArgs(objs, "nb-nbkube-manager")
		for _, w := range tc.apiserver {
			if !slices.Contains(api, w) {
				t.Errorf("%v: API server args %v lack %s", tc.sets, api, w)
			}
		}
		for _, w := range tc.manager {
			if !slices.Contains(mgr, w) {
				t.Errorf("%v: manager args %v lack %s", tc.sets, mgr, w)
			}
		}
		if tc.notAPIServer != "" && slices.ContainsFunc(api, func(a string) bool { return strings.HasPrefix(a, tc.notAPIServer) }) {
			t.Errorf("%v: API server args %v have %s", tc.sets, api, tc.notAPIServer)
		}
	}
	if _, err := helm(t, "template", "nb", chartDir, "--set", "terminals.cullInterval=soon"); err == nil {
		t.Error("the schema accepts terminals.cullInterval=soon")
	}
}

func isNamespaced(t *testing.T, c client.Client, o *unstructured.Unstructured) bool {
	t.Helper()
	namespaced, err := c.IsObjectNamespaced(o)
	if err != nil {
		t.Fatalf("%s: %v", o.GetKind(), err)
	}
	return namespaced
}

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return yaml.Unmarshal(data, into)
}

// TestChart_MetricsServicesFindTheirPorts checks that each metrics Service's target port is a
// port of its component's pods that serves metrics, and that the component's service account
// may review the scrapers' tokens; without metrics.enabled, nothing listens.
func TestChart_MetricsServicesFindTheirPorts(t *testing.T) {
	type component struct {
		args           []string
		ports          map[string]int64
		serviceAccount string
	}
	components := func(objs []*unstructured.Unstructured) map[string]component {
		out := map[string]component{}
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			if err := runtimeFromUnstructured(o, &d); err != nil {
				t.Fatal(err)
			}
			c := d.Spec.Template.Spec.Containers[0]
			ports := map[string]int64{}
			for _, p := range c.Ports {
				ports[p.Name] = int64(p.ContainerPort)
			}
			out[d.Spec.Template.Labels["app.kubernetes.io/component"]] = component{args: c.Args, ports: ports, serviceAccount: d.Spec.Template.Spec.ServiceAccountName}
		}
		return out
	}

	objs := render(t, "nb", "metrics.enabled=true")
	byComponent := components(objs)
	services := 0
	var reviewers []string
	for _, o := range objs {
		switch {
		case o.GetKind() == "Service" && o.GetLabels()["nbkube.io/metrics"] == "true":
			services++
			var svc corev1.Service
			if err := runtimeFromUnstructured(o, &svc); err != nil {
				t.Fatal(err)
			}
			name := svc.Spec.Selector["app.kubernetes.io/component"]
			c, ok := byComponent[name]
			if !ok {
				t.Errorf("Service %s selects component %q, which no Deployment has", svc.Name, name)
				continue
			}
			target := svc.Spec.Ports[0].TargetPort.String()
			port, ok := c.ports[target]
			if !ok {
				t.Errorf("Service %s targets port %q, which the %s container does not declare (it has %v)", svc.Name, target, name, c.ports)
				continue
			}
			if want := fmt.Sprintf("--metrics-bind-address=:%d", port); !slices.Contains(c.args, want) {
				t.Errorf("the %s container does not serve metrics on its %s port: args %v lack %s", name, target, c.args, want)
			}
		case o.GetKind() == "ClusterRoleBinding" && strings.HasSuffix(o.GetName(), "-metrics-auth"):
			var b rbacv1.ClusterRoleBinding
			if err := runtimeFromUnstructured(o, &b); err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Subjects {
				reviewers = append(reviewers, s.Name)
			}
		}
	}
	if services != 2 {
		t.Errorf("%d metrics Services, want the manager's and the API server's", services)
	}
	for name, c := range byComponent {
		if !slices.Contains(reviewers, c.serviceAccount) {
			t.Errorf("the %s's service account %s may not review tokens and access (bound: %v)", name, c.serviceAccount, reviewers)
		}
	}

	for name, c := range components(render(t, "nb")) {
		if _, ok := c.ports["metrics"]; ok || !slices.Contains(c.args, "--metrics-bind-address=0") {
			t.Errorf("without metrics.enabled the %s serves metrics: ports %v, args %v", name, c.ports, c.args)
		}
	}
}

// bcryptHash has the shape of a bcrypt hash, which --set takes without escapes (an argon2id
// hash has commas); the dry run checks objects, not hashes.
const bcryptHash = "$2b$04$ZmFrZXNhbHRmYWtlc2FsdOXJ0yJ1n0l0qYbMhTh0o9lT4rY4S4Uoa"

// apiServerPod is the rendered API server's pod template.
func apiServerPod(t *testing.T, objs []*unstructured.Unstructured) *corev1.PodSpec {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "nb-nbkube-apiserver" {
			var d appsv1.Deployment
			if err := runtimeFromUnstructured(o, &d); err != nil {
				t.Fatal(err)
			}
			return &d.Spec.Template.Spec
		}
	}
	t.Fatal("no API server Deployment")
	return nil
}

// TestChart_UsersProviderGetsItsFileAsTheServerReadsIt: the users list becomes a Secret whose
// users.yaml the users provider accepts, mounted as a whole volume (a subPath would never see
// the kubelet's updates) where --users-file points.
func TestChart_UsersProviderGetsItsFileAsTheServerReadsIt(t *testing.T) {
	hash, err := identity.HashSecret("nbk_ann_SECRET")
	if err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(t.TempDir(), "values.yaml")
	content := "auth:\n  type: [token, users]\n  users:\n    list:\n    - name: ann\n      display_name: Ann Lee\n      groups: [science]\n      act_as: true\n      token_hash: '" + hash + "'\n"
	if err := os.WriteFile(values, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "template", "nb", chartDir, "--namespace", "nb", "--kube-version", "1.36.3", "-f", values)
	if err != nil {
		t.Fatal(err)
	}
	var usersFile string
	var pod *corev1.PodSpec
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if o.Object == nil {
			continue
		}
		objs = append(objs, o)
		if o.GetKind() == "Secret" && o.GetName() == "nb-nbkube-users" {
			usersFile, _, _ = unstructured.NestedString(o.Object, "stringData", "users.yaml")
		}
	}
	pod = apiServerPod(t, objs)
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte(usersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := identity.NewUsersFile(path, identity.UsersFileOptions{})
	if err != nil {
		t.Fatalf("the chart's users file %q: %v", usersFile, err)
	}
	if u, err := p.AuthenticateToken(t.Context(), "nbk_ann_SECRET"); err != nil || u == nil || u.DisplayName != "Ann Lee" || !u.ActAs {
		t.Errorf("ann from the chart's users file: %+v %v", u, err)
	}
	args := pod.Containers[0].Args
	for _, w := range []string{"--auth=token,users", "--users-file=/var/run/nbkube/users/users.yaml"} {
		if !slices.Contains(args, w) {
			t.Errorf("API server args %v lack %s", args, w)
		}
	}
	mounted := false
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.Name == "users" {
			mounted = m.MountPath == "/var/run/nbkube/users" && m.SubPath == "" && m.ReadOnly
		}
	}
	if !mounted {
		t.Errorf("users volume mounts: %+v", pod.Containers[0].VolumeMounts)
	}

	// An existing Secret instead of the list; nothing at all is refused.
	pod = apiServerPod(t, render(t, "nb", "auth.type={users}", "auth.users.existingSecret=team-users"))
	found := false
	for _, v := range pod.Volumes {
		if v.Name == "users" && v.Secret != nil && v.Secret.SecretName == "team-users" {
			found = true
		}
	}
	if !found || !slices.Contains(pod.Containers[0].Args, "--auth=users") {
		t.Errorf("existing users Secret: volumes %+v args %v", pod.Volumes, pod.Containers[0].Args)
	}
	if _, err := helm(t, "template", "nb", chartDir, "--kube-version", "1.36.3", "--set", "auth.type={users}"); err == nil || !strings.Contains(err.Error(), "auth.users") {
		t.Errorf("users without a file: %v", err)
	}
	// A users file user named as the token's admin would own the admin's resources; the API
	// server would not start, and the chart says so first. Without the token, admin is anyone's.
	adminUser := []string{"auth.users.list[0].name=admin", "auth.users.list[0].token_hash=" + strings.ReplaceAll(hash, ",", `\,`)}
	if _, err := helm(t, "template", "nb", chartDir, "--kube-version", "1.36.3", "--set", "auth.type={users,token}",
		"--set", adminUser[0], "--set", adminUser[1]); err == nil || !strings.Contains(err.Error(), "names admin, the token's user") {
		t.Errorf("a users file admin beside the token: %v", err)
	}
	render(t, "nb", append([]string{"auth.type={users}"}, adminUser...)...)
	// The default stays the token alone, with no users volume.
	pod = apiServerPod(t, render(t, "nb"))
	if !slices.Contains(pod.Containers[0].Args, "--auth=token") {
		t.Errorf("default args %v", pod.Containers[0].Args)
	}
	for _, v := range pod.Volumes {
		if v.Name == "users" {
			t.Errorf("a users volume by default")
		}
	}
}

// TestChart_JupyterHubProviderGetsTheHubAndTheServiceToken: with auth.type naming jupyterhub,
// the API server is told the Hub's API URL and finds the service token in its environment
// from the existing Secret, never on its command line; without them the chart refuses.
func TestChart_JupyterHubProviderGetsTheHubAndTheServiceToken(t *testing.T) {
	pod := apiServerPod(t, render(t, "nb", "auth.type={jupyterhub,token}", "auth.jupyterhub.apiURL=http://hub:8081/hub/api",
		"auth.jupyterhub.existingSecret=hub-service"))
	c := pod.Containers[0]
	for _, w := range []string{"--auth=jupyterhub,token", "--hub-api-url=http://hub:8081/hub/api"} {
		if !slices.Contains(c.Args, w) {
			t.Errorf("API server args %v lack %s", c.Args, w)
		}
	}
	found := false
	for _, e := range c.Env {
		if e.Name == "JUPYTERHUB_API_TOKEN" {
			found = e.Value == "" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
				e.ValueFrom.SecretKeyRef.Name == "hub-service" && e.ValueFrom.SecretKeyRef.Key == "api-token"
		}
	}
	if !found {
		t.Errorf("API server env %+v lacks JUPYTERHUB_API_TOKEN from the Secret hub-service", c.Env)
	}
	for _, sets := range [][]string{{"auth.type={jupyterhub}"}, {"auth.type={jupyterhub}", "auth.jupyterhub.apiURL=http://hub:8081/hub/api"}} {
		args := []string{"template", "nb", chartDir, "--kube-version", "1.36.3"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		if _, err := helm(t, args...); err == nil || !strings.Contains(err.Error(), "auth.jupyterhub") {
			t.Errorf("%v: %v", sets, err)
		}
	}
	// Not named, no Hub in the pod.
	for _, e := range apiServerPod(t, render(t, "nb")).Containers[0].Env {
		if e.Name == "JUPYTERHUB_API_TOKEN" {
			t.Error("JUPYTERHUB_API_TOKEN by default")
		}
	}
}

// TestChart_OIDCProviderGetsItsIssuerClaimsAndSecret: with auth.type naming oidc, the API
// server is told the issuer, the client and the claims, and finds the client secret in its
// environment from the existing Secret, never on its command line; browser logins come back
// to auth.publicURL; without issuer or client the chart refuses.
func TestChart_OIDCProviderGetsItsIssuerClaimsAndSecret(t *testing.T) {
	pod := apiServerPod(t, render(t, "nb", "auth.type={oidc,kubernetes}", "auth.oidc.issuerURL=https://idp.example.com/realms/x",
		"auth.oidc.clientID=nbkube", "auth.oidc.existingSecret=oidc-client", "auth.oidc.adminGroups={nb-admins,ops}",
		"auth.oidc.usernameClaim=email", "auth.publicURL=https://nb.example.com"))
	c := pod.Containers[0]
	for _, w := range []string{"--auth=oidc,kubernetes", "--oidc-issuer-url=https://idp.example.com/realms/x", "--oidc-client-id=nbkube",
		"--oidc-username-claim=email", "--oidc-admin-groups=nb-admins,ops", "--public-url=https://nb.example.com"} {
		if !slices.Contains(c.Args, w) {
			t.Errorf("API server args %v lack %s", c.Args, w)
		}
	}
	found := false
	for _, e := range c.Env {
		if e.Name == "NBKUBE_OIDC_CLIENT_SECRET" {
			found = e.Value == "" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
				e.ValueFrom.SecretKeyRef.Name == "oidc-client" && e.ValueFrom.SecretKeyRef.Key == "client-secret"
		}
	}
	if !found {
		t.Errorf("API server env %+v lacks NBKUBE_OIDC_CLIENT_SECRET from the Secret oidc-client", c.Env)
	}
	for _, sets := range [][]string{{"auth.type={oidc}"}, {"auth.type={oidc}", "auth.oidc.issuerURL=https://idp.example.com"}} {
		args := []string{"template", "nb", chartDir, "--kube-version", "1.36.3"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		if _, err := helm(t, args...); err == nil || !strings.Contains(err.Error(), "auth.oidc") {
			t.Errorf("%v: %v", sets, err)
		}
	}
	if _, err := helm(t, "template", "nb", chartDir, "--kube-version", "1.36.3", "--set", "auth.publicURL=https://nb.example.com/path"); err == nil {
		t.Error("a public URL with a path accepted")
	}
}

// TestChart_UsernamePrefixesReachTheProvidersFlags: each provider whose names others choose
// takes its username prefix, ":" and all; none is set by default, so owners stay as they were,
// and a prefix of a provider auth.type does not name is not passed.
func TestChart_UsernamePrefixesReachTheProvidersFlags(t *testing.T) {
	prefixes := []string{"auth.kubernetes.usernamePrefix=k8s:", "auth.jupyterhub.usernamePrefix=hub:", "auth.oidc.usernamePrefix=oidc:"}
	pod := apiServerPod(t, render(t, "nb", append([]string{"auth.type={oidc,jupyterhub,kubernetes,token}", "auth.oidc.issuerURL=https://idp.example.com",
		"auth.oidc.clientID=nbkube", "auth.jupyterhub.apiURL=http://hub:8081/hub/api", "auth.jupyterhub.existingSecret=hub-service"}, prefixes...)...))
	for _, w := range []string{"--kubernetes-username-prefix=k8s:", "--hub-username-prefix=hub:", "--oidc-username-prefix=oidc:"} {
		if !slices.Contains(pod.Containers[0].Args, w) {
			t.Errorf("API server args %v lack %s", pod.Containers[0].Args, w)
		}
	}
	for _, sets := range [][]string{nil, prefixes} {
		for _, a := range apiServerPod(t, render(t, "nb", sets...)).Containers[0].Args {
			if strings.Contains(a, "username-prefix") {
				t.Errorf("%v: %s with auth.type token", sets, a)
			}
		}
	}
}

// nbkube local's sandboxes get the chart's default kernelEgress (builder.LocalNetworkPolicies):
// the two must keep out of the same ranges.
func TestChart_DefaultKernelEgressIsTheLocalNodes(t *testing.T) {
	for _, o := range render(t, "nb") {
		if o.GetKind() != "NetworkPolicy" || !strings.HasSuffix(o.GetName(), "-kernel-egress") {
			continue
		}
		var p networkingv1.NetworkPolicy
		if err := runtimeFromUnstructured(o, &p); err != nil {
			t.Fatal(err)
		}
		var excepts []string
		for _, r := range p.Spec.Egress {
			for _, peer := range r.To {
				if peer.IPBlock != nil && peer.IPBlock.CIDR == "0.0.0.0/0" {
					excepts = peer.IPBlock.Except
				}
			}
		}
		if !slices.Equal(excepts, builder.InternetExcepts) {
			t.Fatalf("the chart's internet rule keeps out of %v, nbkube local's of %v", excepts, builder.InternetExcepts)
		}
		return
	}
	t.Fatal("no kernel-egress NetworkPolicy rendered")
}
