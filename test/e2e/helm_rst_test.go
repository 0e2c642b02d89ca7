//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

// testHelmRST renders reStructuredText through the installed API server, with docutils in the
// renderer pod the manager keeps: in the kernel image, locked down as a kernel is.
func testHelmRST(t *testing.T, env *helmEnv, api *jupyterAPI) {
	testenv.Eventually(t, "the renderer to render", 3*time.Minute, func() error {
		r := postRST(t, api, rstSample)
		if r.status != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", r.status, r.body)
		}
		for _, want := range []string{`<h1 class="title">Notes</h1>`, `<em>emphasis</em>`, `<div class="admonition note">`, `<td>1</td>`} {
			if !strings.Contains(string(r.body), want) {
				t.Errorf("the HTML lacks %q:\n%s", want, r.body)
			}
		}
		return nil
	})
	r := postRST(t, api, "Text with :nosuchrole:`x`.\n").want(t, http.StatusBadRequest)
	if e := r.jupyterError(t); !strings.HasPrefix(e.Message, "Invalid RST: ") {
		t.Errorf("invalid reST: %+v", e)
	}
	if r := postRST(t, api, ".. include:: /etc/passwd\n"); strings.Contains(string(r.body), "root:") {
		t.Errorf("include inserted a file: %s", r.body)
	}

	pods := &corev1.PodList{}
	if err := env.client.List(t.Context(), pods, client.InNamespace(helmNamespace),
		client.MatchingLabels{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelComponent: "rst-renderer"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no renderer pod")
	}
	for _, p := range pods.Items {
		c := p.Spec.Containers[0]
		if c.Image != env.kernelImage {
			t.Errorf("renderer image %s, want the kernel image %s", c.Image, env.kernelImage)
		}
		if ptr.Deref(p.Spec.AutomountServiceAccountToken, true) || !ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) {
			t.Errorf("renderer pod %s is not locked down: %+v", p.Name, p.Spec)
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				t.Errorf("renderer pod %s mounts claim %s", p.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
}
