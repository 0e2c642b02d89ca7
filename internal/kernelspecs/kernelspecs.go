// Package kernelspecs reads the Jupyter kernel specs installed on a host (kernel.json files in
// Jupyter's data directories) and turns them into KernelSpec resources, so that `nbkube local`
// offers the kernels a Jupyter user already has.
//
// A spec's Jupyter name is its directory's name, lower-cased; when that cannot be a resource
// name, the resource gets a name made from it and carries the Jupyter name in
// spec.kernelName. The files of a spec's directory go into a ConfigMap the KernelSpec names,
// the one place the API server serves kernel spec files from, for the host's specs and an
// admin's alike. A ConfigMap holds at most 1 MiB and its keys cannot hold a "/", so what is
// left out is: files in subdirectories, files whose names cannot be keys, anything but
// regular files, and files beyond the 1 MiB (taken in the order of filePriority, then by
// name).
package kernelspecs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// LabelSource marks KernelSpecs (and their ConfigMaps) made from a host's kernel.json, so
// that they can be kept in step with the host without touching those an admin applied.
const LabelSource = "nbkube.io/source"

// SourceHost is the LabelSource value of specs read from the host.
const SourceHost = "host"

// maxFiles bounds the files of one spec, counted as a ConfigMap counts them (keys and
// values): the API server refuses ConfigMaps over 1 MiB.
const maxFiles = corev1.MaxSecretSize

// filePriority are the files kept first when a spec's files do not all fit: what Jupyter's
// clients fetch (kernel.js, kernel.css, the logos), then kernel.json.
var filePriority = []string{"kernel.js", "kernel.css", "logo-64x64.png", "logo-svg.svg", "logo-32x32.png", "kernel.json"}

// Spec is one kernel.json found on the host.
type Spec struct {
	// Name is the directory name, Jupyter's kernel name.
	Name string
	// Dir is the kernel's resource directory.
	Dir string
	// JSON is the parsed kernel.json.
	JSON KernelJSON
	// Files are the files of Dir that its ConfigMap holds, by name.
	Files map[string][]byte
	// Skipped says which files of Dir were left out of Files, and why.
	Skipped []string
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
	s.Files, s.Skipped, err = readFiles(dir)
	if err != nil {
		return Spec{}, err
	}
	return s, nil
}

// readFiles reads the top-level files of dir that a ConfigMap can hold, within maxFiles,
// and says which it left out.
func readFiles(dir string) (map[string][]byte, []string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.SortFunc(names, func(a, b string) int {
		pa, pb := slices.Index(filePriority, a), slices.Index(filePriority, b)
		switch {
		case pa >= 0 && pb >= 0:
			return pa - pb
		case pa >= 0:
			return -1
		case pb >= 0:
			return 1
		}
		return strings.Compare(a, b)
	})
	files := map[string][]byte{}
	var skipped []string
	left := maxFiles
	for _, name := range names {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		switch {
		case err != nil:
			skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
			continue
		case st.IsDir():
			skipped = append(skipped, name+"/: a directory (a ConfigMap holds no directories)")
			continue
		case !st.Mode().IsRegular():
			skipped = append(skipped, name+": not a regular file")
			continue
		case len(validation.IsConfigMapKey(name)) > 0:
			skipped = append(skipped, name+": the name cannot be a ConfigMap key")
			continue
		case st.Size()+int64(len(name)) > int64(left):
			skipped = append(skipped, fmt.Sprintf("%s: %d bytes, over the %d left of a ConfigMap's 1 MiB", name, st.Size(), left-len(name)))
			continue
		}
		data, err := readAtMost(p, left-len(name))
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		files[name] = data
		left -= len(name) + len(data)
	}
	return files, skipped, nil
}

// readAtMost reads a file of at most limit bytes; a larger one (it grew since its size was
// taken) is an error, not read to the end.
func readAtMost(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err == nil && len(data) > limit {
		err = fmt.Errorf("over the %d bytes left of a ConfigMap's 1 MiB", limit)
	}
	return data, err
}

// maxKernelName is the longest Jupyter name a KernelSpec takes (spec.kernelName's bound), a
// file name's longest on Linux.
const maxKernelName = 255

// Names are the resource name and spec.kernelName of the KernelSpec for a Jupyter kernel
// name. Jupyter lists names lower-cased; one that is a valid resource name is the resource's
// name, with no kernelName. Any other becomes a resource name by keeping its ASCII letters
// and digits, turning the rest into dashes, and adding a hash of the whole name, which keeps
// two names that differ only in the rest apart. The error says why a name cannot be a KernelSpec's at all.
func Names(name string) (resource, kernelName string, err error) {
	n := strings.ToLower(name)
	if len(validation.IsDNS1123Subdomain(n)) == 0 {
		return n, "", nil
	}
	switch {
	case n == "" || n == "." || n == "..":
		return "", "", fmt.Errorf("kernel %q: not a name", name)
	case len(n) > maxKernelName:
		return "", "", fmt.Errorf("kernel %q: names are at most %d bytes", name, maxKernelName)
	case strings.ContainsFunc(n, func(r rune) bool { return r == '/' || unicode.IsControl(r) || r == utf8.RuneError }):
		return "", "", fmt.Errorf("kernel %q: a name holds no \"/\", control characters or invalid UTF-8", name)
	}
	var b strings.Builder
	for _, r := range n {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	sum := sha256.Sum256([]byte(n))
	// Leaves room for the hash within a resource name's 253 bytes; the ends must be
	// alphanumeric.
	base := strings.Trim(b.String()[:min(b.Len(), 230)], "-")
	resource = strings.TrimPrefix(base+"-"+hex.EncodeToString(sum[:4]), "-")
	return resource, n, nil
}

// Resource is the KernelSpec for a host kernel spec in namespace. Its files are in the
// ConfigMap of FilesConfigMap, of the same name.
func (s Spec) Resource(namespace string) (*nbv1.KernelSpec, error) {
	name, kernelName, err := Names(s.Name)
	if err != nil {
		return nil, err
	}
	ks := &nbv1.KernelSpec{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: hostLabels(),
		},
		Spec: nbv1.KernelSpecSpec{
			KernelName:    kernelName,
			DisplayName:   s.JSON.DisplayName,
			Language:      s.JSON.Language,
			Argv:          s.JSON.Argv,
			InterruptMode: nbv1.InterruptMode(s.JSON.InterruptMode),
			Env:           s.JSON.Env,
		},
	}
	if len(s.Files) > 0 {
		ks.Spec.Files = &nbv1.KernelSpecFiles{ConfigMapName: name}
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

// FilesConfigMap is the ConfigMap of the spec's files for its KernelSpec ks: text in data,
// the rest in binaryData. It is owned by ks, so that deleting the KernelSpec deletes it.
func (s Spec) FilesConfigMap(ks *nbv1.KernelSpec) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ks.Name, Namespace: ks.Namespace, Labels: hostLabels(),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: nbv1.GroupVersion.String(), Kind: "KernelSpec", Name: ks.Name, UID: ks.UID,
			}},
		},
	}
	for name, data := range s.Files {
		if utf8.Valid(data) {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[name] = string(data)
			continue
		}
		if cm.BinaryData == nil {
			cm.BinaryData = map[string][]byte{}
		}
		cm.BinaryData[name] = data
	}
	return cm
}

func hostLabels() map[string]string {
	return map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, LabelSource: SourceHost}
}
