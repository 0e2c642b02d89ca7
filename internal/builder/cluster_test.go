package builder

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

func testCluster(state nbv1.ClusterState, engines int32) *nbv1.Cluster {
	return &nbv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ns", UID: "uid-c1"},
		Spec:       nbv1.ClusterParameters{Owner: "bob", State: state, Engines: engines},
	}
}

func TestClusterDeployments_ReplicasFollowState(t *testing.T) {
	tests := []struct {
		state                 nbv1.ClusterState
		engines               int32
		wantCtrl, wantEngines int32
	}{
		{nbv1.ClusterRunning, 3, 1, 3},
		{"", 2, 1, 2}, // unset means the CRD default, Running
		{nbv1.ClusterStopped, 3, 0, 0},
		{nbv1.ClusterRunning, 0, 1, 0},
	}
	for _, tc := range tests {
		c := testCluster(tc.state, tc.engines)
		ctrl := ClusterControllerDeployment(c, DefaultOptions())
		eng := ClusterEnginesDeployment(c, DefaultOptions())
		if *ctrl.Spec.Replicas != tc.wantCtrl || *eng.Spec.Replicas != tc.wantEngines {
			t.Errorf("state %q engines %d: replicas controller %d engines %d, want %d %d",
				tc.state, tc.engines, *ctrl.Spec.Replicas, *eng.Spec.Replicas, tc.wantCtrl, tc.wantEngines)
		}
	}
}

func TestClusterControllerService_SelectsOnlyTheControllerAndExposesThePortPool(t *testing.T) {
	c := testCluster(nbv1.ClusterRunning, 2)
	svc := ClusterControllerService(c)
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	ctrl := ClusterControllerDeployment(c, DefaultOptions())
	eng := ClusterEnginesDeployment(c, DefaultOptions())
	if !sel.Matches(labels.Set(ctrl.Spec.Template.Labels)) {
		t.Error("service does not select the controller pods")
	}
	if sel.Matches(labels.Set(eng.Spec.Template.Labels)) {
		t.Error("service selects engine pods")
	}
	if len(svc.Spec.Ports) != ClusterPorts || svc.Spec.Ports[0].Port != ClusterFirstPort {
		t.Errorf("ports %v", svc.Spec.Ports)
	}
	if d := cmp.Diff("--ports=10101-10120", ctrl.Spec.Template.Spec.Containers[0].Command[3]); d != "" {
		t.Errorf("controller port pool (-want +got):\n%s", d)
	}
}

func TestClusterObjects_ImageResourcesAndOwnership(t *testing.T) {
	c := testCluster(nbv1.ClusterRunning, 1)
	c.Spec.Image = "example.com/ipp:2"
	c.Spec.EngineResources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	eng := ClusterEnginesDeployment(c, DefaultOptions())
	pod := eng.Spec.Template.Spec
	if pod.Containers[0].Image != "example.com/ipp:2" {
		t.Errorf("image %s", pod.Containers[0].Image)
	}
	if got := pod.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.String() != "500m" {
		t.Errorf("engine cpu request %s", got.String())
	}
	for _, o := range []metav1.Object{eng, ClusterControllerDeployment(c, DefaultOptions()), ClusterControllerService(c), ClusterSecret(c, "k")} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].Kind != "Cluster" || refs[0].UID != "uid-c1" || !*refs[0].Controller {
			t.Errorf("%s owner references %v", o.GetName(), refs)
		}
	}
	if def := ClusterControllerDeployment(testCluster(nbv1.ClusterRunning, 1), DefaultOptions()); def.Spec.Template.Spec.Containers[0].Image != DefaultOptions().DefaultClusterImage {
		t.Error("default cluster image not used")
	}
}
