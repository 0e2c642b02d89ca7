package jupyter

// The shapes of the IPython notebook's first web services, which nbkube serves beside the
// current API.

// LegacyNotebook is an entry of GET /notebooks.
type LegacyNotebook struct {
	NotebookID string `json:"notebook_id"`
	Name       string `json:"name"`
	// KernelID is the kernel of the notebook's session; null when it has none.
	KernelID *string `json:"kernel_id"`
}

// LegacyKernel is what POST /kernels and a restart answered in IPython: where the kernel's
// channels are.
type LegacyKernel struct {
	WSURL    string `json:"ws_url"`
	KernelID string `json:"kernel_id"`
}

// LegacyKernelModel is the body of GET /kernels/<id>: where the channels are, and the
// kernel's state.
type LegacyKernelModel struct {
	LegacyKernel
	Name           string `json:"name"`
	ExecutionState string `json:"execution_state"`
	LastActivity   Time   `json:"last_activity"`
	Connections    int    `json:"connections"`
}
