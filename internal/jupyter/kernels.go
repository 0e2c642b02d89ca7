package jupyter

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Kernel is Jupyter's kernel model (GET /api/kernels/<id>).
type Kernel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	LastActivity   Time   `json:"last_activity"`
	ExecutionState string `json:"execution_state"`
	Connections    int    `json:"connections"`
	// Owner is the user the kernel belongs to (nbkube's), so that an admin, who sees
	// everyone's, can tell whose it is.
	Owner string `json:"owner,omitempty"`
}

// StartKernel is the body of POST /api/kernels.
type StartKernel struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Env is what Jupyter Server in gateway mode sends (KERNEL_USERNAME, KERNEL_WORKING_DIR,
	// its other KERNEL_* variables and those of its env whitelist), as Kernel and Enterprise
	// Gateway take it.
	Env KernelEnv `json:"env"`
	// Parameters are the values of the kernel spec's launch parameters (nbkube's; the schema
	// is the spec's metadata.parameters, as Jupyter's parameterized kernel specs have it).
	Parameters KernelParameters `json:"parameters"`
}

// KernelParameters are a start's launch parameters: names to JSON values, numbers kept as
// written (json.Number).
type KernelParameters map[string]any

// UnmarshalJSON reads an object, numbers as json.Number.
func (p *KernelParameters) UnmarshalJSON(data []byte) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return fmt.Errorf("parameters: %w", err)
	}
	*p = m
	return nil
}

// KernelEnv is the env of a kernel start: names to string values. Any other value, null
// included, is an error, not a string the client did not mean.
type KernelEnv map[string]string

// UnmarshalJSON refuses values that are not strings.
func (e *KernelEnv) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		*e = nil
		return nil
	}
	out := make(KernelEnv, len(raw))
	for k, v := range raw {
		var s string
		if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
			return fmt.Errorf("env %q: the value must be a string", k)
		}
		out[k] = s
	}
	*e = out
	return nil
}

// Session is Jupyter's session model (GET /api/sessions/<id>).
type Session struct {
	ID   string `json:"id"`
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
	// Kernel is null while the session has no kernel.
	Kernel *Kernel `json:"kernel"`
	// Notebook is the older form of path and name, still read by some clients.
	Notebook SessionNotebook `json:"notebook"`
	// Cluster is the ipyparallel cluster the session's kernel is attached to (nbkube's).
	Cluster string `json:"cluster,omitempty"`
	// Owner is the user the session belongs to (nbkube's).
	Owner string `json:"owner,omitempty"`
}

// SessionNotebook is the notebook part of the older session model.
type SessionNotebook struct {
	Path string `json:"path"`
	Name string `json:"name"`
}

// SessionRequest is the body of POST and PATCH /api/sessions: every field optional in a
// PATCH. The older clients send notebook.path instead of path.
type SessionRequest struct {
	Path   *string               `json:"path"`
	Name   *string               `json:"name"`
	Type   *string               `json:"type"`
	Kernel *SessionKernelRequest `json:"kernel"`
	// Cluster attaches the session's kernel to an ipyparallel cluster (nbkube's); a change
	// starts a new kernel.
	Cluster  *string `json:"cluster"`
	Notebook *struct {
		Path *string `json:"path"`
		Name *string `json:"name"`
	} `json:"notebook"`
}

// SessionKernelRequest names a kernel spec to start (name) or a running kernel (id).
type SessionKernelRequest struct {
	Name *string `json:"name"`
	ID   *string `json:"id"`
	// Parameters are the launch parameters of a kernel the session starts (nbkube's, as
	// StartKernel's).
	Parameters KernelParameters `json:"parameters"`
}
