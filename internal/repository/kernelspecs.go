package repository

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/kernelspecs"
)

// KernelSpecs reads the KernelSpecs of one namespace: the kinds of kernel users can start.
// Every user sees all of them.
type KernelSpecs struct {
	// Reader reads the KernelSpecs, usually the manager's cached client.
	Reader client.Reader
	// Namespace holds the KernelSpecs.
	Namespace string
	// Host, when set, brings the host's kernel specs in before every read (`nbkube local`).
	// For a while after a sync (HostSettle), and always without a Reader, reads go through
	// Host.Client, the client the sync wrote with: a cache shows a spec just installed only
	// after its watch event, and a removed one for as long. Otherwise they read the Reader,
	// since a read of the API server costs a few milliseconds of every kernel start.
	Host *kernelspecs.Host
	// HostSettle is how long after a sync reads go around the Reader; 2 s when zero, far
	// more than a watch event takes on a busy machine.
	HostSettle time.Duration
}

// KernelSpecResource is a file of a kernel spec, served under /kernelspecs/<name>/.
type KernelSpecResource struct {
	FileName    string
	ContentType string
	Data        []byte
}

// logoTypes are the Content-Types of the logo files the KernelSpec CRD admits.
var logoTypes = map[string]string{".png": "image/png", ".svg": "image/svg+xml"}

// ListKernelSpecs returns the model of every kernel spec, sorted by name. A model's Resources
// map each resource to its file name, for the API server to make URLs of.
func (k *KernelSpecs) ListKernelSpecs(ctx context.Context) ([]jupyter.KernelSpec, error) {
	var list nbv1.KernelSpecList
	if err := k.reader(ctx).List(ctx, &list, client.InNamespace(k.Namespace)); err != nil {
		return nil, fmt.Errorf("list kernel specs: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b nbv1.KernelSpec) int { return strings.Compare(a.Name, b.Name) })
	out := make([]jupyter.KernelSpec, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, kernelSpecModel(&list.Items[i]))
	}
	return out, nil
}

// GetKernelSpec returns the model of the kernel spec called name, as ListKernelSpecs does.
// Names match case-insensitively, as jupyter_client lower-cases them; the model has the
// spec's own name.
func (k *KernelSpecs) GetKernelSpec(ctx context.Context, name string) (jupyter.KernelSpec, error) {
	ks, err := k.get(ctx, name)
	if err != nil {
		return jupyter.KernelSpec{}, err
	}
	return kernelSpecModel(ks), nil
}

// GetKernelSpecResource returns the file of the kernel spec called name. A KernelSpec carries
// one file, its logo; Jupyter serves any file of the spec's directory.
func (k *KernelSpecs) GetKernelSpecResource(ctx context.Context, name, file string) (KernelSpecResource, error) {
	ks, err := k.get(ctx, name)
	if err != nil {
		return KernelSpecResource{}, err
	}
	logo := ks.Spec.Logo
	if logo == nil || file != logo.FileName {
		// Tornado's message for a file that is not there.
		return KernelSpecResource{}, notFound("Not Found")
	}
	return KernelSpecResource{FileName: logo.FileName, ContentType: logoTypes[path.Ext(logo.FileName)], Data: logo.Data}, nil
}

// get returns the kernel spec called name; the error of a missing one matches domainerr.ErrNotFound.
func (k *KernelSpecs) get(ctx context.Context, name string) (*nbv1.KernelSpec, error) {
	key := strings.ToLower(name)
	if !validName(key) {
		return nil, kernelSpecMissing(name)
	}
	ks := &nbv1.KernelSpec{}
	err := k.reader(ctx).Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: key}, ks)
	switch {
	case apierrors.IsNotFound(err):
		return nil, kernelSpecMissing(name)
	case err != nil:
		return nil, fmt.Errorf("get kernel spec %s: %w", key, err)
	}
	return ks, nil
}

func kernelSpecMissing(name string) error {
	return notFound(fmt.Sprintf("Kernel spec %s not found", name))
}

// kernelSpecModel is Jupyter Server's kernelspec_model of ks, with kernel.json as
// jupyter_client reports it: env and metadata {} rather than missing, interrupt_mode
// "signal" unless set.
func kernelSpecModel(ks *nbv1.KernelSpec) jupyter.KernelSpec {
	spec := &ks.Spec
	file := jupyter.KernelSpecFile{
		Argv:          spec.Argv,
		Env:           spec.Env,
		DisplayName:   spec.DisplayName,
		Language:      spec.Language,
		InterruptMode: string(spec.InterruptMode),
		Metadata:      json.RawMessage(`{}`),
	}
	if file.Env == nil {
		file.Env = map[string]string{}
	}
	if file.InterruptMode == "" {
		file.InterruptMode = string(nbv1.InterruptModeSignal)
	}
	if spec.Metadata != nil && len(spec.Metadata.Raw) > 0 {
		file.Metadata = spec.Metadata.Raw
	}
	resources := map[string]string{}
	if logo := spec.Logo; logo != nil {
		resources[strings.TrimSuffix(logo.FileName, path.Ext(logo.FileName))] = logo.FileName
	}
	return jupyter.KernelSpec{Name: ks.Name, Spec: file, Resources: resources}
}

// reader refreshes the host's specs, if any, and returns the reader that sees them.
func (k *KernelSpecs) reader(ctx context.Context) client.Reader {
	if k.Host == nil {
		return k.Reader
	}
	// A failed sync leaves the previous specs in place: the answer lists those rather than
	// failing, as Jupyter lists the specs it can read and logs the others.
	if names, synced, err := k.Host.Refresh(ctx); err != nil {
		log.FromContext(ctx).Error(err, "Kernel specs of this machine not all synced", "offered", names)
	} else if synced {
		log.FromContext(ctx).V(1).Info("Kernel specs of this machine synced", "offered", names)
	}
	settle := k.HostSettle
	if settle <= 0 {
		settle = 2 * time.Second
	}
	if k.Reader == nil || k.Host.SyncedWithin(settle) {
		return k.Host.Client
	}
	return k.Reader
}
