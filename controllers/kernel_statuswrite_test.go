package controllers_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/controllers"
)

// The field managers of the Kernel's status writers, as the API server records them.
const (
	kernelControllerManager = "nbkube-kernel-controller"
	cullerManager           = "nbkube-culler"
	// legacyManager is the name the status writes before server-side apply were recorded
	// under: the API server's name for the nbkube binary's client.
	legacyManager = "nbkube"
)

// statusEntry is the managed fields entry of manager's operation op on the status, nil when
// there is none.
func statusEntry(k *nbv1.Kernel, manager string, op metav1.ManagedFieldsOperationType) *metav1.ManagedFieldsEntry {
	for i, e := range k.ManagedFields {
		if e.Manager == manager && e.Operation == op && e.Subresource == "status" {
			return &k.ManagedFields[i]
		}
	}
	return nil
}

// ownsCondition tells whether the entry owns the condition of type typ.
func ownsCondition(e *metav1.ManagedFieldsEntry, typ string) bool {
	return e != nil && e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), fmt.Sprintf(`k:{\"type\":\"%s\"}`, typ))
}

// asWrittenByUpdate makes the Kernel's status fields owned as a Status().Update of the
// controller before server-side apply left them: by an Update entry of legacyManager, with
// no apply entry of the controller's.
func asWrittenByUpdate(t *testing.T, k *nbv1.Kernel) {
	t.Helper()
	if err := get(k); err != nil {
		t.Fatal(err)
	}
	fields := k.DeepCopy().ManagedFields
	found := false
	for i := range fields {
		if fields[i].Manager == kernelControllerManager && fields[i].Operation == metav1.ManagedFieldsOperationApply {
			fields[i].Manager, fields[i].Operation, found = legacyManager, metav1.ManagedFieldsOperationUpdate, true
		}
	}
	if !found {
		t.Fatalf("the controller has no apply entry: %+v", k.ManagedFields)
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": fields},
		{"op": "replace", "path": "/metadata/resourceVersion", "value": k.ResourceVersion},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Patch(context.Background(), k, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		t.Fatal(err)
	}
	if e := statusEntry(k, legacyManager, metav1.ManagedFieldsOperationUpdate); !ownsCondition(e, nbv1.ConditionFailed) {
		t.Fatalf("the old writer does not own the Failed condition: %+v", k.ManagedFields)
	}
}

// A Kernel whose status the controller wrote with Status().Update before it applied its
// status: its first apply takes those fields over, so a condition it no longer sets (Failed,
// once the missing kernel spec exists) is really removed rather than kept by the old entry.
func TestKernel_StatusOfTheOldUpdateIsTakenOverAndADroppedConditionRemoved(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, k)
	kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelSpecNotFound)
	asWrittenByUpdate(t, k)

	create(t, kernelSpec(ns, "python3"))
	eventually(t, "the Failed condition removed", func() error {
		if err := get(k); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed); c != nil {
			return fmt.Errorf("conditions %+v", k.Status.Conditions)
		}
		return nil
	})
	if e := statusEntry(k, legacyManager, metav1.ManagedFieldsOperationUpdate); e != nil {
		t.Errorf("the old writer's entry stays: %s", e.FieldsV1.GetRawString())
	}
	if e := statusEntry(k, kernelControllerManager, metav1.ManagedFieldsOperationApply); !ownsCondition(e, nbv1.ConditionReady) {
		t.Errorf("the controller does not own its Ready condition: %+v", k.ManagedFields)
	}
}

// The culler's Culled condition survives the controller's next status write, and each owns
// only its own conditions.
func TestKernel_CullersConditionSurvivesTheControllersApply(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, k)
	kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelSpecNotFound)
	c := &controllers.Culler{Client: k8sClient}
	if err := c.ApplyCulledForTest(context.Background(), k, nbv1.ReasonKernelDead, "the kernel is dead", time.Now()); err != nil {
		t.Fatal(err)
	}

	// The spec's arrival changes the controller's conditions (Failed goes, Ready's reason
	// moves on), and the controller writes them.
	create(t, kernelSpec(ns, "python3"))
	eventually(t, "the controller's next status", func() error {
		if err := get(k); err != nil {
			return err
		}
		if meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed) != nil {
			return fmt.Errorf("conditions %+v", k.Status.Conditions)
		}
		return nil
	})
	if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionCulled); c == nil || c.Reason != string(nbv1.ReasonKernelDead) {
		t.Errorf("the Culled condition after the controller's write: %+v", k.Status.Conditions)
	}
	if e := statusEntry(k, kernelControllerManager, metav1.ManagedFieldsOperationApply); e == nil || ownsCondition(e, nbv1.ConditionCulled) {
		t.Errorf("the controller owns the culler's condition: %+v", k.ManagedFields)
	}
	if e := statusEntry(k, cullerManager, metav1.ManagedFieldsOperationApply); !ownsCondition(e, nbv1.ConditionCulled) || ownsCondition(e, nbv1.ConditionReady) {
		t.Errorf("the culler's fields: %+v", k.ManagedFields)
	}
}

// applyCount counts the status applies made through it.
type applyCount struct {
	client.Client
	n *atomic.Int32
}

func (c applyCount) Status() client.SubResourceWriter {
	return applyCountWriter{SubResourceWriter: c.Client.Status(), n: c.n}
}

type applyCountWriter struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (w applyCountWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	w.n.Add(1)
	return w.SubResourceWriter.Apply(ctx, obj, opts...)
}

// A status the Kernel already has is not applied again, with the culler's condition among
// the controller's: the order the API server merges the two writers' conditions in does not
// make the controller's copy look changed.
func TestKernel_AnUnchangedStatusIsNotAppliedAgain(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, k)
	kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelSpecNotFound)
	c := &controllers.Culler{Client: k8sClient}
	if err := c.ApplyCulledForTest(context.Background(), k, nbv1.ReasonKernelDead, "the kernel is dead", time.Now()); err != nil {
		t.Fatal(err)
	}
	// The controller applies its conditions again, beside the culler's.
	create(t, kernelSpec(ns, "python3"))
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodPending)
	var applies atomic.Int32
	r := &controllers.KernelReconciler{
		Client: applyCount{Client: k8sClient, n: &applies}, APIReader: k8sClient,
		Recorder: events.NewFakeRecorder(10), Clock: clk, Rand: rand.Reader, Options: opts, StatusInterval: statusInterval,
	}
	for range 2 {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := applies.Load(); n != 0 {
		t.Errorf("%d applies of a status the kernel has", n)
	}
}

// The Kernel controller's status write, the hand-over from the old writer included, needs no
// more than the manager's role as make manifests generates it (the chart's).
func TestKernel_StatusWriteNeedsOnlyTheManagersRole(t *testing.T) {
	ns := namespace(t)
	data, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var generated rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &generated); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manager"}, Rules: generated.Rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manager"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "manager"}}}
	create(t, role, binding)
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":manager"}
	manager, err := client.New(cfg, client.Options{Scheme: kinds})
	if err != nil {
		t.Fatal(err)
	}

	k := kernel(ns, "k1", "python3")
	create(t, k)
	kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelSpecNotFound)
	asWrittenByUpdate(t, k)
	// The old writer's last status, which the controller corrects: a failed kernel is dead.
	// (A status write alone does not wake the suite's controller.)
	k.Status.ExecutionState = nbv1.ExecutionStateIdle
	if err := k8sClient.Status().Update(context.Background(), k, client.FieldOwner(legacyManager)); err != nil {
		t.Fatal(err)
	}

	r := &controllers.KernelReconciler{
		Client: manager, APIReader: manager,
		Recorder: events.NewFakeRecorder(10), Clock: clk, Rand: rand.Reader, Options: opts, StatusInterval: statusInterval,
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(k)}); err != nil {
		t.Fatal(err)
	}
	if err := get(k); err != nil {
		t.Fatal(err)
	}
	if k.Status.ExecutionState != nbv1.ExecutionStateDead {
		t.Errorf("execution state %q after the reconcile, want dead", k.Status.ExecutionState)
	}
	if e := statusEntry(k, legacyManager, metav1.ManagedFieldsOperationUpdate); e != nil {
		t.Errorf("the old writer's entry stays: %s", e.FieldsV1.GetRawString())
	}
}
