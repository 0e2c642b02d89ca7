package repository

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/kernelparams"
	"github.com/nbkube/nbkube/internal/kernelspecs"
)

// The files of kernel specs are ConfigMaps the KernelSpecs name, read through the same cache:
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// KernelSpecs reads the KernelSpecs of one namespace: the kinds of kernel users can start.
// Every user sees all of them.
//
// A KernelSpec answers to its Jupyter name (spec.kernelName, else its resource name),
// case-insensitively as jupyter_client matches names. The CRD cannot keep two KernelSpecs
// from taking one name, so reads do: the older is served and the other hidden, which keeps a
// name from moving to a spec applied later.
type KernelSpecs struct {
	// Reader reads the KernelSpecs and their ConfigMaps, usually the manager's cached client.
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
	FileName string
	Data     []byte
}

// nativeKernel is jupyter_client's NATIVE_KERNEL_NAME: the kernel its KernelManager starts
// when asked for "python", whatever specs there are.
const nativeKernel = "python3"

// ListKernelSpecs returns the model of every kernel spec, sorted by name. A model's Resources
// map each resource to its file name, for the API server to make URLs of.
func (k *KernelSpecs) ListKernelSpecs(ctx context.Context) ([]jupyter.KernelSpec, error) {
	r := k.reader(ctx)
	specs, err := k.served(ctx, r)
	if err != nil {
		return nil, err
	}
	out := make([]jupyter.KernelSpec, 0, len(specs))
	for _, ks := range specs {
		out = append(out, kernelSpecModel(ks, k.files(ctx, r, ks)))
	}
	return out, nil
}

// GetKernelSpec returns the model of the kernel spec called name, as ListKernelSpecs does.
// Names match case-insensitively, as jupyter_client lower-cases them; the model has the
// spec's own name.
func (k *KernelSpecs) GetKernelSpec(ctx context.Context, name string) (jupyter.KernelSpec, error) {
	r := k.reader(ctx)
	ks, err := k.find(ctx, r, name)
	if err != nil {
		return jupyter.KernelSpec{}, err
	}
	return kernelSpecModel(ks, k.files(ctx, r, ks)), nil
}

// GetKernelSpecResource returns the file of the kernel spec called name: its logo, or a file
// of its ConfigMap. A file name is one path segment, since ConfigMap keys cannot hold more;
// one that cannot be a key is no file.
func (k *KernelSpecs) GetKernelSpecResource(ctx context.Context, name, file string) (KernelSpecResource, error) {
	r := k.reader(ctx)
	ks, err := k.find(ctx, r, name)
	if err != nil {
		return KernelSpecResource{}, err
	}
	// Tornado's message for a file that is not there.
	missing := domainerr.NotFound("Not Found")
	if logo := ks.Spec.Logo; logo != nil && file == logo.FileName {
		return KernelSpecResource{FileName: logo.FileName, Data: logo.Data}, nil
	}
	if len(validation.IsConfigMapKey(file)) > 0 {
		return KernelSpecResource{}, missing
	}
	cm, err := k.configMap(ctx, r, ks)
	if err != nil {
		return KernelSpecResource{}, err
	}
	if cm == nil {
		return KernelSpecResource{}, missing
	}
	if data, ok := cm.Data[file]; ok {
		return KernelSpecResource{FileName: file, Data: []byte(data)}, nil
	}
	if data, ok := cm.BinaryData[file]; ok {
		return KernelSpecResource{FileName: file, Data: data}, nil
	}
	return KernelSpecResource{}, missing
}

// resolveStart is the KernelSpec that a kernel start asking for name runs: "python" is the
// native kernel, as jupyter_client's KernelManager has it. A name that no spec answers to is
// jupyter_client's NoSuchKernel.
func (k *KernelSpecs) resolveStart(ctx context.Context, name string) (*nbv1.KernelSpec, error) {
	if name == "python" {
		name = nativeKernel
	}
	ks, err := k.find(ctx, k.reader(ctx), name)
	if errors.Is(err, domainerr.ErrNotFound) {
		return nil, noSuchKernel(name)
	}
	return ks, err
}

// kernelNames maps the name of each KernelSpec with a spec.kernelName to that name, for
// the models of kernels, which run KernelSpecs by resource name and are called by their
// spec's Jupyter name. It reads what the last sync left and does not sync: a failed read
// leaves kernels called by their resource names.
func (k *KernelSpecs) kernelNames(ctx context.Context) kernelNames {
	// Bounded: the names only decorate the models, which must not wait on a control plane
	// that does not answer (right after a sync of the host's specs the read goes through the
	// API, not the cache).
	ctx, cancel := context.WithTimeout(ctx, namesTimeout)
	defer cancel()
	var list nbv1.KernelSpecList
	// Only names are read, so the cache's objects need no copies.
	if err := k.current().List(ctx, &list, client.InNamespace(k.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).V(1).Info("Kernel spec names not read; kernels are called by their specs' resource names", "error", err.Error())
		return nil
	}
	names := kernelNames{}
	for i := range list.Items {
		if ks := &list.Items[i]; ks.Spec.KernelName != "" {
			names[ks.Name] = ks.Spec.KernelName
		}
	}
	return names
}

// namesTimeout bounds kernelNames' read.
const namesTimeout = 2 * time.Second

// kernelNames maps KernelSpec resource names to their Jupyter names where they differ.
type kernelNames map[string]string

// of is the Jupyter name of the KernelSpec named spec.
func (n kernelNames) of(spec string) string {
	if name, ok := n[spec]; ok {
		return name
	}
	return spec
}

// served returns the KernelSpecs that answer to their Jupyter names, sorted by name: of
// those that share a name, the oldest (by creation, then by resource name).
func (k *KernelSpecs) served(ctx context.Context, r client.Reader) ([]*nbv1.KernelSpec, error) {
	var list nbv1.KernelSpecList
	if err := r.List(ctx, &list, client.InNamespace(k.Namespace)); err != nil {
		return nil, fmt.Errorf("list kernel specs: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b nbv1.KernelSpec) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	seen := map[string]bool{}
	out := make([]*nbv1.KernelSpec, 0, len(list.Items))
	for i := range list.Items {
		ks := &list.Items[i]
		if key := strings.ToLower(ks.JupyterName()); !seen[key] {
			seen[key] = true
			out = append(out, ks)
		}
	}
	slices.SortFunc(out, func(a, b *nbv1.KernelSpec) int { return strings.Compare(a.JupyterName(), b.JupyterName()) })
	return out, nil
}

// find returns the served KernelSpec called name; the error of a missing one matches
// domainerr.ErrNotFound.
func (k *KernelSpecs) find(ctx context.Context, r client.Reader, name string) (*nbv1.KernelSpec, error) {
	specs, err := k.served(ctx, r)
	if err != nil {
		return nil, err
	}
	for _, ks := range specs {
		if strings.EqualFold(ks.JupyterName(), name) {
			return ks, nil
		}
	}
	return nil, kernelSpecMissing(name)
}

func kernelSpecMissing(name string) error {
	return domainerr.NotFound("Kernel spec %s not found", name)
}

func noSuchKernel(name string) error {
	return domainerr.NotFound("No such kernel named %s", name)
}

// configMap is the ConfigMap of the spec's files; nil when it names none or the ConfigMap
// does not exist.
func (k *KernelSpecs) configMap(ctx context.Context, r client.Reader, ks *nbv1.KernelSpec) (*corev1.ConfigMap, error) {
	if ks.Spec.Files == nil {
		return nil, nil
	}
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: ks.Spec.Files.ConfigMapName}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get the files of kernel spec %s: %w", ks.Name, err)
	}
	return cm, nil
}

// files are the names of the files in the spec's ConfigMap. One that cannot be read leaves
// the spec without files in its model rather than failing the answer, as Jupyter lists the
// specs whose resources it cannot read.
func (k *KernelSpecs) files(ctx context.Context, r client.Reader, ks *nbv1.KernelSpec) []string {
	cm, err := k.configMap(ctx, r, ks)
	if err != nil {
		log.FromContext(ctx).Error(err, "Files of a kernel spec not listed", "kernelSpec", ks.Name)
	}
	if cm == nil {
		return nil
	}
	names := make([]string, 0, len(cm.Data)+len(cm.BinaryData))
	for name := range cm.Data {
		names = append(names, name)
	}
	for name := range cm.BinaryData {
		names = append(names, name)
	}
	return names
}

// kernelSpecModel is Jupyter Server's kernelspec_model of ks, whose files are those named,
// with kernel.json as jupyter_client reports it: env and metadata {} rather than missing,
// interrupt_mode "signal" unless set. Its resources are those Jupyter Server lists of a spec
// directory: kernel.js and kernel.css by file name, the logo-* files by name without
// extension; the others are served but not listed.
func kernelSpecModel(ks *nbv1.KernelSpec, files []string) jupyter.KernelSpec {
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
	if schema := kernelparams.Schema(ks); schema != nil {
		file.Metadata = withParameterSchema(file.Metadata, schema)
	}
	if logo := spec.Logo; logo != nil {
		files = append(files, logo.FileName)
	}
	resources := map[string]string{}
	for _, f := range files {
		switch {
		case f == "kernel.js" || f == "kernel.css":
			resources[f] = f
		case strings.HasPrefix(f, "logo-"):
			resources[strings.TrimSuffix(f, path.Ext(f))] = f
		}
	}
	return jupyter.KernelSpec{Name: ks.JupyterName(), Spec: file, Resources: resources}
}

// reader refreshes the host's specs, if any, and returns the reader that sees them.
func (k *KernelSpecs) reader(ctx context.Context) client.Reader {
	if k.Host != nil {
		// A failed sync leaves the previous specs in place: the answer lists those rather
		// than failing, as Jupyter lists the specs it can read and logs the others.
		if names, synced, err := k.Host.Refresh(ctx); err != nil {
			log.FromContext(ctx).Error(err, "Kernel specs of this machine not all synced", "offered", names)
		} else if synced {
			log.FromContext(ctx).V(1).Info("Kernel specs of this machine synced", "offered", names)
		}
	}
	return k.current()
}

// current is the reader that sees the last sync's writes.
func (k *KernelSpecs) current() client.Reader {
	if k.Host == nil {
		return k.Reader
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

// withParameterSchema is kernel.json's metadata with the spec's launch parameters as
// metadata.parameters, the JSON schema of Jupyter's parameterized kernel specs (JEP 87). The
// spec's own metadata.parameters, if any, gives way: the declared parameters are what a start
// is held to.
func withParameterSchema(metadata json.RawMessage, schema map[string]any) json.RawMessage {
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(metadata, &m); err != nil || m == nil {
		// The schema makes metadata an object; were it anything else, the parameters win.
		m = map[string]json.RawMessage{}
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return metadata
	}
	m["parameters"] = raw
	out, err := json.Marshal(m)
	if err != nil {
		return metadata
	}
	return out
}
