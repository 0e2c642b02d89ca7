// Package scheme builds the runtime.Scheme that nbkube's Kubernetes clients use, in the
// manager and `nbkube local` as in the tests: client-go's kinds (Pods, Secrets, Leases, ...)
// and nbkube's own. It lives apart from api/v1alpha1 so that the API types stay importable
// without client-go's scheme.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// New returns a scheme of client-go's kinds and nbkube's. Each call makes a new one: a
// scheme is mutable, and callers must not share additions by accident.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(nbv1.AddToScheme(s))
	return s
}
