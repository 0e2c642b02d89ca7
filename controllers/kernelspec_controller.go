package controllers

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/distribution/reference"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// Reconcile validates the KernelSpec and writes the verdict when it changed.
func (r *KernelSpecReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ks := &nbv1.KernelSpec{}
	if err := r.Get(ctx, req.NamespacedName, ks); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := kernelSpecStatus(ks, validateKernelSpec(&ks.Spec, r.Builder), metav1.NewTime(r.Clock.Now()))
	_, err := writeStatus(ctx, r.Client, ks, kernelSpecStatusOf, st)
	return ctrl.Result{}, err
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

// SetupWithManager watches KernelSpecs.
func (r *KernelSpecReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&nbv1.KernelSpec{}).Named("kernelspec").Complete(r)
}
