// Package kernelspecs reads the Jupyter kernel specs installed on a host (kernel.json files in
// Jupyter's data directories) and turns them into KernelSpec resources, so that `nbkube local`
// offers the kernels a Jupyter user already has.
package kernelspecs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// LabelSource marks KernelSpecs made from a host's kernel.json, so that they can be kept in
// step with the host without touching those an admin applied.
const LabelSource = "nbkube.io/source"

// SourceHost is the LabelSource value of specs read from the host.
const SourceHost = "host"

// maxLogo bounds a logo carried into the resource (the CRD's limit).
const maxLogo = 64 << 10

// logoFiles are Jupyter's logo files in the order one is chosen for the resource, which holds
// only one: the 64x64 PNG first, the logo every Jupyter client knows to show.
var logoFiles = []string{"logo-64x64.png", "logo-svg.svg", "logo-32x32.png"}

// Spec is one kernel.json found on the host.
type Spec struct {
	// Name is the directory name, Jupyter's kernel name.
	Name string
	// Dir is the kernel's resource directory.
	Dir string
	// JSON is the parsed kernel.json.
	JSON KernelJSON
	// Logo is the first of Jupyter's logo files present, if any.
	Logo *nbv1.KernelLogo
}

// KernelJSON is Jupyter's kernel.json.
type KernelJSON struct {
	Argv          []string          `json:"argv"`
	DisplayName   string            `json:"display_name"`
	Language      string            `json:"language"`
	InterruptMode string            `json:"interrupt_mode,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Metadata      json.RawMessage   `json:"metadata,omitempty"`
}

// Dirs is Jupyter's search path for kernel specs, first match wins, as jupyter_core's
// jupyter_path("kernels"): $JUPYTER_PATH entries, the user data directory ($JUPYTER_DATA_DIR
// or ~/.local/share/jupyter), then the system directories. getenv is os.Getenv in production.
func Dirs(getenv func(string) string) []string {
	var dirs []string
	for _, p := range filepath.SplitList(getenv("JUPYTER_PATH")) {
		if p != "" {
			dirs = append(dirs, filepath.Join(p, "kernels"))
		}
	}
	data := getenv("JUPYTER_DATA_DIR")
	if data == "" {
		if xdg := getenv("XDG_DATA_HOME"); xdg != "" {
			data = filepath.Join(xdg, "jupyter")
		} else if home := getenv("HOME"); home != "" {
			data = filepath.Join(home, ".local", "share", "jupyter")
		}
	}
	if data != "" {
		dirs = append(dirs, filepath.Join(data, "kernels"))
	}
	return append(dirs, "/usr/local/share/jupyter/kernels", "/usr/share/jupyter/kernels")
}

// Find reads every kernel spec under dirs; a name found in an earlier directory hides later
// ones. Unreadable or malformed specs are returned as errors next to the good ones.
func Find(dirs []string) ([]Spec, []error) {
	var specs []Spec
	var errs []error
	seen := map[string]bool{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if seen[strings.ToLower(name)] {
				continue
			}
			spec, err := load(filepath.Join(dir, name), name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			seen[strings.ToLower(name)] = true
			specs = append(specs, spec)
		}
	}
	return specs, errs
}

func load(dir, name string) (Spec, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		return Spec{}, err
	}
	s := Spec{Name: name, Dir: dir}
	if err := json.Unmarshal(data, &s.JSON); err != nil {
		return Spec{}, fmt.Errorf("%s/kernel.json: %w", dir, err)
	}
	if len(s.JSON.Argv) == 0 {
		return Spec{}, fmt.Errorf("%s/kernel.json: empty argv", dir)
	}
	for _, logo := range logoFiles {
		if data, ok := readLogo(filepath.Join(dir, logo)); ok {
			s.Logo = &nbv1.KernelLogo{FileName: logo, Data: data}
			break
		}
	}
	return s, nil
}

// readLogo reads a logo file of at most maxLogo bytes; larger ones are not read to the end.
func readLogo(path string) ([]byte, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxLogo+1))
	return data, err == nil && len(data) <= maxLogo
}

// ResourceName is the KernelSpec name for a Jupyter kernel name, or an error when the name
// cannot be one (Jupyter allows upper case and underscores; resource names do not).
func ResourceName(name string) (string, error) {
	n := strings.ToLower(name)
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		return "", fmt.Errorf("kernel %q cannot be a resource name: %s", name, strings.Join(errs, ", "))
	}
	return n, nil
}

// Resource is the KernelSpec for a host kernel spec in namespace.
func (s Spec) Resource(namespace string) (*nbv1.KernelSpec, error) {
	name, err := ResourceName(s.Name)
	if err != nil {
		return nil, err
	}
	ks := &nbv1.KernelSpec{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, LabelSource: SourceHost},
		},
		Spec: nbv1.KernelSpecSpec{
			DisplayName:   s.JSON.DisplayName,
			Language:      s.JSON.Language,
			Argv:          s.JSON.Argv,
			InterruptMode: nbv1.InterruptMode(s.JSON.InterruptMode),
			Env:           s.JSON.Env,
			Logo:          s.Logo,
		},
	}
	if ks.Spec.DisplayName == "" {
		ks.Spec.DisplayName = s.Name
	}
	if ks.Spec.Language == "" {
		ks.Spec.Language = "unknown"
	}
	if len(s.JSON.Metadata) > 0 && string(s.JSON.Metadata) != "null" {
		ks.Spec.Metadata = &apiextensionsv1.JSON{Raw: s.JSON.Metadata}
	}
	return ks, nil
}
