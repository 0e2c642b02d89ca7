package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/distribution/reference"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/kernelparams"
)

// KernelSpecReconciler checks what the CRD's schema cannot (image references, environment
// variable names, resource bounds, logo contents, the pod template) and reports it in the Ready condition.
type KernelSpecReconciler struct {
	client.Client
	Clock clock.PassiveClock
	// Builder is how kernel pods are built: the default image runs kernels of specs that
	// name none, and the contents claim is what a pod template may not mount.
	Builder builder.Options
}

// +kubebuilder:rbac:groups=nbkube.io,resources=kernelspecs,verbs=get;list;watch
// +kubebuilder:rbac:groups=nbkube.io,resources=kernelspecs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=kernels,verbs=get;list;watch;create;update;delete

// Reconcile validates the KernelSpec, keeps its warm pool, and writes the verdict and the
// pool's counts when they changed. A deleted spec's warm kernels are deleted.
func (r *KernelSpecReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ks := &nbv1.KernelSpec{}
	if err := r.Get(ctx, req.NamespacedName, ks); apierrors.IsNotFound(err) {
		ks = &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace}}
		_, next, err := r.reconcileWarmPool(ctx, ks, false)
		return ctrl.Result{RequeueAfter: next}, err
	} else if err != nil {
		return ctrl.Result{}, err
	}
	problems := validateKernelSpec(&ks.Spec, r.Builder)
	st := kernelSpecStatus(ks, problems, metav1.NewTime(r.Clock.Now()))
	pool, next, poolErr := r.reconcileWarmPool(ctx, ks, len(problems) == 0)
	if poolErr == nil {
		st.WarmPool = pool
	}
	_, _, err := writeStatus(ctx, r.Client, ks, kernelSpecStatusOf, st)
	return ctrl.Result{RequeueAfter: next}, errors.Join(poolErr, err)
}

func kernelSpecStatusOf(ks *nbv1.KernelSpec) *nbv1.KernelSpecStatus { return &ks.Status }

// kernelSpecStatus is the verdict on a spec with the given problems. Validation has no step
// that can fail, so there is no reconcile error to report.
func kernelSpecStatus(ks *nbv1.KernelSpec, problems []string, now metav1.Time) nbv1.KernelSpecStatus {
	st := *ks.Status.DeepCopy()
	st.ObservedGeneration = ks.Generation
	if len(problems) > 0 {
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonSpecInvalid, strings.Join(problems, "; "), ks.Generation, now)
	} else {
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonSpecValid, "the kernel spec can start kernels", ks.Generation, now)
	}
	return st
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// validateKernelSpec lists what is wrong with a spec, in words for its author.
func validateKernelSpec(s *nbv1.KernelSpecSpec, o builder.Options) []string {
	problems := builder.CheckPodTemplate(s.PodTemplate, o.ContentsClaim)
	problems = append(problems, kernelparams.Check(&nbv1.KernelSpec{Spec: *s})...)
	if len(s.Argv) == 0 || strings.TrimSpace(s.Argv[0]) == "" {
		problems = append(problems, "argv[0] must name the kernel's program")
	}
	image := s.Image
	if image == "" {
		image = o.DefaultKernelImage
	}
	if image == "" {
		problems = append(problems, "no image: set spec.image or the operator's default kernel image")
	} else if _, err := reference.ParseNormalizedNamed(image); err != nil {
		problems = append(problems, fmt.Sprintf("image %q: %v", image, err))
	}
	for _, p := range s.Parameters {
		if !p.Image {
			continue
		}
		for _, e := range p.Enum {
			if _, err := reference.ParseNormalizedNamed(e); err != nil {
				problems = append(problems, fmt.Sprintf("parameter %s: image %q: %v", p.Name, e, err))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Env)) {
		if errs := validation.IsEnvVarName(name); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("env %q: %s", name, strings.Join(errs, ", ")))
		}
	}
	for name, limit := range s.Resources.Limits {
		if req, ok := s.Resources.Requests[name]; ok && req.Cmp(limit) > 0 {
			problems = append(problems, fmt.Sprintf("resources: %s request %s exceeds its limit %s", name, req.String(), limit.String()))
		}
	}
	if l := s.Logo; l != nil {
		switch path.Ext(l.FileName) {
		case ".png":
			if !bytes.HasPrefix(l.Data, pngMagic) {
				problems = append(problems, fmt.Sprintf("logo %s is not a PNG image", l.FileName))
			}
		case ".svg":
			if !bytes.Contains(l.Data[:min(len(l.Data), 1024)], []byte("<svg")) {
				problems = append(problems, fmt.Sprintf("logo %s is not an SVG image", l.FileName))
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// SetupWithManager watches KernelSpecs, and the Kernels that matter to their warm pools:
// those made, claimed or deleted, and warm ones getting ready or failing.
func (r *KernelSpecReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&nbv1.KernelSpec{}).
		Watches(&nbv1.Kernel{}, handler.EnqueueRequestsFromMapFunc(r.specOfKernel), ctrlbuilder.WithPredicates(warmPoolChange)).
		Named("kernelspec").Complete(r)
}

// specOfKernel maps a Kernel to its KernelSpec when the spec has a warm pool or the kernel
// is warm (the pool of a spec that no longer has one, or is gone, is emptied).
func (r *KernelSpecReconciler) specOfKernel(ctx context.Context, o client.Object) []reconcile.Request {
	k := o.(*nbv1.Kernel)
	key := client.ObjectKey{Namespace: k.Namespace, Name: k.Spec.KernelSpec}
	if !k.Warm() {
		ks := &nbv1.KernelSpec{}
		if err := r.Get(ctx, key, ks); err != nil || ks.Spec.WarmPool == nil {
			return nil
		}
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// warmPoolChange lets through the kernel events a pool may need to act on; the status
// updates of running kernels are most events and none of them.
var warmPoolChange = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		was, is := e.ObjectOld.(*nbv1.Kernel), e.ObjectNew.(*nbv1.Kernel)
		if was.Warm() != is.Warm() || is.DeletionTimestamp != nil {
			return true
		}
		if !is.Warm() {
			return false
		}
		for _, c := range []string{nbv1.ConditionReady, nbv1.ConditionFailed} {
			if meta.IsStatusConditionTrue(was.Status.Conditions, c) != meta.IsStatusConditionTrue(is.Status.Conditions, c) {
				return true
			}
		}
		return false
	},
}
