package jupyter

import "encoding/json"

// KernelSpecs is the body of GET /api/kernelspecs: the default kernel's name and every kernel
// spec by name.
type KernelSpecs struct {
	Default     string                `json:"default"`
	KernelSpecs map[string]KernelSpec `json:"kernelspecs"`
}

// KernelSpec is a kernel spec as GET /api/kernelspecs/<name> returns it: Jupyter Server's
// kernelspec_model, the kernel.json and the URLs of the spec's resource files.
type KernelSpec struct {
	Name string         `json:"name"`
	Spec KernelSpecFile `json:"spec"`
	// Resources maps a resource to its URL, an absolute path under the base URL: the logo
	// files by name without extension ("logo-64x64"), kernel.js and kernel.css by name.
	Resources map[string]string `json:"resources"`
}

// KernelSpecFile is kernel.json as jupyter_client's KernelSpec.to_dict reports it: env and
// metadata are {} rather than missing, interrupt_mode is "signal" unless set.
type KernelSpecFile struct {
	Argv          []string          `json:"argv"`
	Env           map[string]string `json:"env"`
	DisplayName   string            `json:"display_name"`
	Language      string            `json:"language"`
	InterruptMode string            `json:"interrupt_mode"`
	Metadata      json.RawMessage   `json:"metadata"`
}
