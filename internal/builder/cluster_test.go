package builder

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

func testCluster(engines int32) *nbv1.Cluster {
	return &nbv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ns", UID: "uid-c1"},
		Spec:       nbv1.ClusterParameters{Owner: "bob", State: nbv1.ClusterRunning, Engines: engines},
	}
}

func TestClusterControllerService_SelectsOnlyTheControllerAndExposesItsPorts(t *testing.T) {
	c := testCluster(2)
	svc := ClusterControllerService(c)
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	if !sel.Matches(labels.Set(ClusterControllerPod(c, DefaultOptions()).Labels)) {
		t.Error("service does not select the controller pod")
	}
	if sel.Matches(labels.Set(ClusterEnginePod(c, DefaultOptions(), "u").Labels)) {
		t.Error("service selects engine pods")
	}
	// Registration, the engines' 8 ports and the clients' 6: the ipcontroller's internal
	// ports stay out of reach.
	if len(svc.Spec.Ports) != 15 || svc.Spec.Ports[0].Port != 10101 || svc.Spec.Ports[14].Port != 10115 {
		t.Errorf("ports %v", svc.Spec.Ports)
	}
	if !svc.Spec.PublishNotReadyAddresses {
		t.Error("engines cannot reach the controller through the Service until its readiness probe passes")
	}
}

func TestClusterSecret_FilesNameTheAddressOnceKnown(t *testing.T) {
	c := testCluster(2)
	iface := func(s *corev1.Secret, file string) string {
		var f struct {
			Interface string `json:"interface"`
			Key       string `json:"key"`
		}
		if err := json.Unmarshal(s.Data[file], &f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if f.Key != "k3y" {
			t.Errorf("%s key %q", file, f.Key)
		}
		return f.Interface
	}
	svcMode := DefaultOptions()
	if addr := ClusterControllerAddress(c, svcMode, "10.0.0.9"); addr != "c1-ipcontroller.ns.svc" {
		t.Errorf("address through the service %q", addr)
	}
	s, err := ClusterSecret(c, "k3y", ClusterControllerAddress(c, svcMode, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := iface(s, ClusterClientFile); got != "tcp://c1-ipcontroller.ns.svc" {
		t.Errorf("client interface %q", got)
	}
	if got := iface(s, ClusterEngineFile); got != "tcp://c1-ipcontroller.ns.svc" {
		t.Errorf("engine interface %q", got)
	}
	for _, f := range []string{ClusterControllerEngineFile, ClusterControllerClientFile} {
		if got := iface(s, f); got != "tcp://0.0.0.0" {
			t.Errorf("%s interface %q", f, got)
		}
	}

	podMode := DefaultOptions()
	podMode.ClusterControllerByPodIP = true
	s, err = ClusterSecret(c, "k3y", ClusterControllerAddress(c, podMode, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Data[ClusterClientFile]; ok {
		t.Error("client file before the ipcontroller has an address")
	}
	if _, ok := s.Data[ClusterControllerEngineFile]; !ok {
		t.Error("no ipcontroller copy")
	}
	s, _ = ClusterSecret(c, "k3y", ClusterControllerAddress(c, podMode, "127.0.0.7"))
	if got := iface(s, ClusterClientFile); got != "tcp://127.0.0.7" {
		t.Errorf("client interface by pod IP %q", got)
	}
}

// The ipcontroller pod's script, run by a real sh with a fake ipcontroller on PATH, writes
// the ipcontroller's files with the pod IP as interface, private, and runs ipcontroller on them.
func TestClusterControllerPod_ScriptBindsThePodIP(t *testing.T) {
	c := testCluster(1)
	s, err := ClusterSecret(c, "k3y", "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secretDir, profile, bin := filepath.Join(dir, "secret"), filepath.Join(dir, "profile"), filepath.Join(dir, "bin")
	for _, d := range []string{secretDir, profile, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(secretDir, k), v, 0o440); err != nil {
			t.Fatal(err)
		}
	}
	fake := "#!/bin/sh\necho \"$@\" > \"" + filepath.Join(dir, "args") + "\"\n"
	if err := os.WriteFile(filepath.Join(bin, "ipcontroller"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := ClusterControllerPod(c, DefaultOptions()).Spec.Containers[0].Command
	args := slices.Clone(cmd[1:])
	for i, a := range args {
		args[i] = strings.NewReplacer(ClusterProfileDir, profile, ClusterSecretDir, secretDir, "$(POD_IP)", "127.0.0.9").Replace(a)
	}
	run := exec.Command(cmd[0], args...)
	run.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "args"))
	if want := "--reuse --ip=127.0.0.9 --profile-dir=" + profile + "\n"; string(got) != want {
		t.Errorf("ipcontroller args %q, want %q", got, want)
	}
	for _, f := range []string{"ipcontroller-engine.json", "ipcontroller-client.json"} {
		path := filepath.Join(profile, "security", f)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var conn map[string]any
		if err := json.Unmarshal(b, &conn); err != nil || conn["interface"] != "tcp://127.0.0.9" || conn["key"] != "k3y" {
			t.Errorf("%s: %s (%v)", f, b, err)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", f, st.Mode())
		}
	}
}

func TestClusterEnginePod_RegistersUnderItsPodName(t *testing.T) {
	c := testCluster(1)
	p := ClusterEnginePod(c, DefaultOptions(), "uid-ctl")
	if p.GenerateName != "c1-ipengine-" || p.Annotations[AnnotationControllerPod] != "uid-ctl" {
		t.Errorf("engine pod meta %+v", p.ObjectMeta)
	}
	ctr := p.Spec.Containers[0]
	if !slices.Contains(ctr.Command, "--ident=$(POD_NAME)") || !slices.Contains(ctr.Command, "--file="+ClusterSecretDir+"/"+ClusterEngineFile) {
		t.Errorf("engine command %v", ctr.Command)
	}
	if i := slices.IndexFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAME" }); i < 0 || ctr.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME env %v", ctr.Env)
	}
	// An engine sees its connection file only, not the ipcontroller's copies.
	items := p.Spec.Volumes[2].Secret.Items
	if len(items) != 1 || items[0].Key != ClusterEngineFile {
		t.Errorf("engine secret items %v", items)
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restart policy %s", p.Spec.RestartPolicy)
	}
}

func TestClusterObjects_ImageResourcesAndOwnership(t *testing.T) {
	c := testCluster(1)
	c.Spec.Image = "example.com/ipp:2"
	c.Spec.EngineResources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	eng := ClusterEnginePod(c, DefaultOptions(), "u")
	if eng.Spec.Containers[0].Image != "example.com/ipp:2" {
		t.Errorf("image %s", eng.Spec.Containers[0].Image)
	}
	if got := eng.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.String() != "500m" {
		t.Errorf("engine cpu request %s", got.String())
	}
	secret, err := ClusterSecret(c, "k", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []metav1.Object{eng, ClusterControllerPod(c, DefaultOptions()), ClusterControllerService(c), secret} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].Kind != "Cluster" || refs[0].UID != "uid-c1" || !*refs[0].Controller {
			t.Errorf("%s owner references %v", o.GetName(), refs)
		}
	}
	if def := ClusterControllerPod(testCluster(1), DefaultOptions()); def.Spec.Containers[0].Image != DefaultOptions().DefaultClusterImage {
		t.Error("default cluster image not used")
	}
}

func TestKernelPod_AttachedClusterGetsItsClientFile(t *testing.T) {
	k, spec := testKernel(func(k *nbv1.Kernel) { k.Spec.Cluster = "c1" }), testSpec(nil)
	p := KernelPod(k, spec, DefaultOptions())
	i := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "ipcluster" })
	if i < 0 {
		t.Fatalf("no ipcluster volume in %v", p.Spec.Volumes)
	}
	v := p.Spec.Volumes[i]
	// The volume holds an ipyparallel cluster's client file or a dask cluster's TLS files,
	// whichever the Secret has.
	if v.Secret == nil || v.Secret.SecretName != "c1-ipcluster" || !*v.Secret.Optional || len(v.Secret.Items) != 4 ||
		v.Secret.Items[0].Key != ClusterClientFile || v.Secret.Items[1].Key != DaskCAFile || v.Secret.Items[2].Key != DaskCertFile || v.Secret.Items[3].Key != DaskKeyFile {
		t.Errorf("cluster volume %+v", v)
	}
	c := &p.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env["NBKUBE_IPCLUSTER_PROFILE"].Value != "c1" || env["NBKUBE_IPCLUSTER_FILE"].Value != KernelClusterDir+"/"+ClusterClientFile {
		t.Errorf("cluster env %v", c.Env)
	}
	// A dask cluster's settings come from the same Secret, each optional: an ipyparallel
	// cluster's Secret has none of them.
	for _, name := range []string{"DASK_SCHEDULER_ADDRESS", "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION",
		"DASK_DISTRIBUTED__COMM__TLS__CA_FILE", "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT", "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"} {
		ref := env[name].ValueFrom
		if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "c1-ipcluster" || ref.SecretKeyRef.Key != name || !*ref.SecretKeyRef.Optional {
			t.Errorf("%s = %+v, want the optional key of the cluster's Secret", name, env[name])
		}
	}

	if p := KernelPod(testKernel(nil), spec, DefaultOptions()); slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "ipcluster" }) {
		t.Error("a kernel without a cluster mounts one")
	}
}
