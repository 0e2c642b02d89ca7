package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/testenv"
)

// Auto takes the agent from an image volume while every node of the cluster, as the API
// server lists them, can mount one; a node that cannot, or none at all, keeps init
// containers. The decision holds for Every and is then made again, in the background. A
// delivery that is not Auto, or nbkube local's host directory, is left as it is.
func TestAgentDeliveries_DecidedFromTheNodes(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Now())
	a := &controllers.AgentDeliveries{Reader: k8sClient, Clock: clock, Every: time.Minute}
	auto := builder.DefaultOptions()
	if auto.AgentDelivery != builder.AgentAuto {
		t.Fatalf("default delivery %q, want Auto", auto.AgentDelivery)
	}
	resolved := func(what string, want builder.AgentDelivery) {
		t.Helper()
		if got := a.Resolve(ctx, auto).AgentDelivery; got != want {
			t.Errorf("%s: %s, want %s", what, got, want)
		}
	}
	// A decision due again is made in the background; the one at hand serves meanwhile.
	refreshed := func(what string, before, want builder.AgentDelivery) {
		t.Helper()
		resolved(what+", the decision before", before)
		testenv.Eventually(t, what, 10*time.Second, func() error {
			if got := a.Resolve(ctx, auto).AgentDelivery; got != want {
				return fmt.Errorf("%s, want %s", got, want)
			}
			return nil
		})
	}
	resolved("no nodes", builder.AgentInitContainer)

	node(t, "delivery-new", "v1.36.3", "containerd://2.4.2")
	node(t, "delivery-crio", "v1.36.3", "cri-o://1.36.0")
	resolved("nodes before the decision is due again", builder.AgentInitContainer)
	clock.Step(time.Minute)
	refreshed("every node mounts image volumes", builder.AgentInitContainer, builder.AgentImageVolume)

	node(t, "delivery-old", "v1.36.3", "containerd://1.7.27")
	clock.Step(time.Minute - time.Second)
	resolved("a node that cannot, within Every", builder.AgentImageVolume)
	time.Sleep(100 * time.Millisecond) // no refresh was started to change it meanwhile
	resolved("a node that cannot, within Every, still", builder.AgentImageVolume)
	clock.Step(time.Second)
	refreshed("a node that cannot", builder.AgentImageVolume, builder.AgentInitContainer)

	for _, d := range []builder.AgentDelivery{builder.AgentInitContainer, builder.AgentImageVolume} {
		o := auto
		o.AgentDelivery = d
		if got := a.Resolve(ctx, o).AgentDelivery; got != d {
			t.Errorf("configured %s: resolved to %s", d, got)
		}
	}
	local := auto
	local.AgentHostDir = "/opt/nbkube/bin"
	if got := a.Resolve(ctx, local).AgentDelivery; got != builder.AgentAuto {
		t.Errorf("with the agent's host directory: resolved to %s, want it left alone", got)
	}
	var none *controllers.AgentDeliveries
	if got := none.Resolve(ctx, auto).AgentDelivery; got != builder.AgentAuto {
		t.Errorf("no resolver: %s, want Auto left for the builder (an init container)", got)
	}
}

// node makes a node reporting the kubelet and runtime versions, gone when the test ends.
func node(t *testing.T, name, kubelet, runtime string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8sClient.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), n) })
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: kubelet, ContainerRuntimeVersion: runtime}
	if err := k8sClient.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// The reStructuredText renderer's pods take the agent as Auto decides, as kernel pods do:
// from an image volume on a cluster whose every node mounts one.
func TestRSTRendererKeeper_TakesTheAgentAsAutoDecides(t *testing.T) {
	ns := namespace(t)
	manager := managerDeployment(t, ns)
	node(t, "renderer-node", "v1.37.0", "containerd://2.4.2")
	o := builder.DefaultOptions()
	k := &controllers.RSTRendererKeeper{Client: k8sClient, Reader: k8sClient, AgentTokenKey: agentTokenKey, Builder: o,
		Deliveries: &controllers.AgentDeliveries{Reader: k8sClient, Clock: clocktesting.NewFakeClock(time.Now())},
		Options:    controllers.RSTRendererOptions{Namespace: ns, OwnerDeployment: manager.Name}}
	if err := k.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: builder.RSTRendererName}}
	if err := get(deploy); err != nil {
		t.Fatal(err)
	}
	spec := deploy.Spec.Template.Spec
	if len(spec.InitContainers) != 0 || spec.Volumes[0].Image == nil || spec.Volumes[0].Image.Reference != o.AgentImage {
		t.Errorf("renderer pods: init containers %v, agent volume %+v; want the agent from an image volume of %s",
			spec.InitContainers, spec.Volumes[0], o.AgentImage)
	}
}
