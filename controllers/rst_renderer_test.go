package controllers_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
)

func TestRSTRendererKeeper_KeepsTheRendererAndItsToken(t *testing.T) {
	ns := namespace(t)
	manager := managerDeployment(t, ns)
	key := agentTokenKey
	keeper := func(o builder.Options) *controllers.RSTRendererKeeper {
		return &controllers.RSTRendererKeeper{Client: k8sClient, Reader: k8sClient, AgentTokenKey: key, Builder: o,
			Options: controllers.RSTRendererOptions{Namespace: ns, OwnerDeployment: manager.Name, Interval: 100 * time.Millisecond}}
	}
	// run starts a keeper; what it returns stops it.
	run := func(o builder.Options) func() {
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- keeper(o).Start(ctx) }()
		return func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("keeper: %v", err)
			}
		}
	}
	stop := run(opts)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: builder.RSTRendererName}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: builder.RSTRendererName}}
	eventually(t, "the renderer's secret and deployment", func() error {
		if err := get(secret); err != nil {
			return err
		}
		return get(deploy)
	})
	// The API server, which reads no Secrets, derives the same token.
	token := string(secret.Data[agentapi.SecretKeyToken])
	if want := agenttoken.RSTRenderer(agentTokenKey, ns); token != want {
		t.Errorf("token %q, want %q derived from the key", token, want)
	}
	for _, o := range []metav1.Object{secret, deploy} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != manager.UID || refs[0].Kind != "Deployment" {
			t.Errorf("%s owned by %+v, want the manager's deployment", o.GetName(), refs)
		}
	}
	if got := deploy.Spec.Template.Annotations[builder.AnnotationRSTSecret]; got != string(secret.UID) {
		t.Errorf("pod template names secret %q, want %q", got, secret.UID)
	}

	// Deleted, the deployment comes back with the same token.
	if err := k8sClient.Delete(context.Background(), deploy); err != nil {
		t.Fatal(err)
	}
	old := deploy.UID
	eventually(t, "the deployment restored", func() error {
		if err := get(deploy); err != nil {
			return err
		}
		if deploy.UID == old {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err := get(secret); err != nil || string(secret.Data[agentapi.SecretKeyToken]) != token {
		t.Errorf("the token changed or the secret went: %v", err)
	}

	// Another manager with other settings keeps the token and brings the deployment to its own.
	stop()
	o := opts
	o.RSTRenderer.Replicas = 2
	stop = run(o)
	eventually(t, "the deployment updated", func() error {
		if err := get(deploy); err != nil {
			return err
		}
		if ptr.Deref(deploy.Spec.Replicas, 0) != 2 {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err := get(secret); err != nil || string(secret.Data[agentapi.SecretKeyToken]) != token {
		t.Errorf("the token changed or the secret went: %v", err)
	}

	stop()

	// A manager with another key (rotated, or the Secret made before tokens were derived)
	// makes the Secret again, which rolls the renderer's pods onto the new token.
	key = []byte("another agent token key, 32 byte")
	oldSecret := secret.UID
	stop = run(o)
	eventually(t, "the secret made again with the new token", func() error {
		if err := get(secret); err != nil {
			return err
		}
		if secret.UID == oldSecret || string(secret.Data[agentapi.SecretKeyToken]) != agenttoken.RSTRenderer(key, ns) {
			return context.DeadlineExceeded
		}
		if err := get(deploy); err != nil {
			return err
		}
		if deploy.Spec.Template.Annotations[builder.AnnotationRSTSecret] != string(secret.UID) {
			return context.DeadlineExceeded
		}
		return nil
	})
	stop()

	// Disabled, the renderer goes.
	k := keeper(o)
	k.Options.Disabled = true
	if err := k.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{deploy, secret} {
		if err := get(obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T after disabling: %v", obj, err)
		}
	}
}

// managerDeployment makes a Deployment in ns standing for the manager's, which owns the
// renderer's objects.
func managerDeployment(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	manager := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nbkube-manager"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "m"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "m"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "m", Image: "m"}}},
			},
		},
	}
	create(t, manager)
	return manager
}
