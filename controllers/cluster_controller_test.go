package controllers_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
)

func clusterCondition(t *testing.T, c *nbv1.Cluster, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	eventually(t, fmt.Sprintf("cluster %s condition %s=%s/%s", c.Name, typ, status, reason), func() error {
		if err := get(c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, typ)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		return nil
	})
}

func deploymentReplicas(t *testing.T, ns, name string, want int32) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	eventually(t, fmt.Sprintf("deployment %s with %d replicas", name, want), func() error {
		if err := get(d); err != nil {
			return err
		}
		if *d.Spec.Replicas != want {
			return fmt.Errorf("replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
	return d
}

// setReady plays the deployment controller: it reports ready replicas through the API.
func setReady(t *testing.T, d *appsv1.Deployment, ready int32) {
	t.Helper()
	eventually(t, "update deployment status", func() error {
		if err := get(d); err != nil {
			return err
		}
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = ready, ready, ready
		return k8sClient.Status().Update(context.Background(), d)
	})
}

func TestCluster_StartScaleStop(t *testing.T) {
	ns := namespace(t)
	c := &nbv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
		Spec:       nbv1.ClusterParameters{Owner: "alice", Engines: 3},
	}
	create(t, c)
	if err := get(c); err != nil || c.Spec.State != nbv1.ClusterRunning {
		t.Fatalf("default state %q (%v), want Running", c.Spec.State, err)
	}

	ctrlDep := deploymentReplicas(t, ns, "c1-ipcontroller", 1)
	engDep := deploymentReplicas(t, ns, "c1-ipengine", 3)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ipcontroller"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ipcluster"}}
	eventually(t, "service and secret", func() error {
		if err := get(svc); err != nil {
			return err
		}
		return get(secret)
	})
	if len(svc.Spec.Ports) != builder.ClusterPorts || svc.Spec.ClusterIP == "" {
		t.Errorf("service %+v", svc.Spec)
	}
	if len(secret.Data[builder.ClusterSecretKey]) != 64 {
		t.Errorf("cluster key %q", secret.Data[builder.ClusterSecretKey])
	}
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionFalse, "ControllerStarting")

	setReady(t, ctrlDep, 1)
	clusterCondition(t, c, nbv1.ConditionControllerReady, metav1.ConditionTrue, "ControllerReady")
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionFalse, "EnginesStarting")
	setReady(t, engDep, 3)
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionTrue, "Running")
	if c.Status.ReadyEngines != 3 {
		t.Errorf("ready engines %d", c.Status.ReadyEngines)
	}

	update(t, c, func(c *nbv1.Cluster) { c.Spec.Engines = 1 })
	deploymentReplicas(t, ns, "c1-ipengine", 1)
	eventually(t, "scale event", func() error { return findEvent(ns, "c1", "Cluster", "ScaledEngines") })
	// The service keeps its cluster IP through updates of the cluster.
	ip := svc.Spec.ClusterIP
	if err := get(svc); err != nil || svc.Spec.ClusterIP != ip {
		t.Errorf("service changed: %v %v", svc.Spec.ClusterIP, err)
	}

	update(t, c, func(c *nbv1.Cluster) { c.Spec.State = nbv1.ClusterStopped })
	deploymentReplicas(t, ns, "c1-ipcontroller", 0)
	deploymentReplicas(t, ns, "c1-ipengine", 0)
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionFalse, "Stopped")
	eventually(t, "stop event", func() error { return findEvent(ns, "c1", "Cluster", "Stopped") })
}

func TestCluster_ReplicaFailureIsReported(t *testing.T) {
	ns := namespace(t)
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: nbv1.ClusterParameters{Owner: "alice", Engines: 2}}
	create(t, c)
	eng := deploymentReplicas(t, ns, "c1-ipengine", 2)
	eventually(t, "deployment failure condition", func() error {
		if err := get(eng); err != nil {
			return err
		}
		eng.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
			Reason: "FailedCreate", Message: `pods "c1-ipengine-x" is forbidden: exceeded quota`}}
		return k8sClient.Status().Update(context.Background(), eng)
	})
	clusterCondition(t, c, nbv1.ConditionFailed, metav1.ConditionTrue, "FailedCreate")
}

func TestKernelSpec_ReadyReflectsValidation(t *testing.T) {
	ns := namespace(t)
	ks := kernelSpec(ns, "r")
	ks.Spec.Image = "Not A Valid/Reference"
	create(t, ks)
	eventually(t, "invalid", func() error {
		if err := get(ks); err != nil {
			return err
		}
		c := meta.FindStatusCondition(ks.Status.Conditions, nbv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Invalid" {
			return fmt.Errorf("conditions %v", ks.Status.Conditions)
		}
		return nil
	})
	update(t, ks, func(ks *nbv1.KernelSpec) { ks.Spec.Image = "registry.example.com/r-kernel:4.3" })
	eventually(t, "valid", func() error {
		if err := get(ks); err != nil {
			return err
		}
		c := meta.FindStatusCondition(ks.Status.Conditions, nbv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || ks.Status.ObservedGeneration != ks.Generation {
			return fmt.Errorf("conditions %v", ks.Status.Conditions)
		}
		return nil
	})
}
