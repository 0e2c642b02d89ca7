package jupyter

// Version is the body of GET /api: the version of the API, nothing else, since it answers
// without a token.
type Version struct {
	Version string `json:"version"`
}

// Status is the body of GET /api/status.
type Status struct {
	// Started is when the server started.
	Started Time `json:"started"`
	// LastActivity is the last activity the server knows of.
	LastActivity Time `json:"last_activity"`
	// Kernels and Connections count the user's kernels and the clients connected to them.
	Kernels     int `json:"kernels"`
	Connections int `json:"connections"`
	// Quota is the user's usage and limits, when the installation has policies.
	Quota *Quota `json:"quota,omitempty"`
}

// Me is the body of GET /api/me, Jupyter Server 2's identity endpoint.
type Me struct {
	Identity Identity `json:"identity"`
	// Permissions maps a resource to the actions the user may take on it; {} when none
	// were asked for.
	Permissions map[string][]string `json:"permissions"`
	// Quota is the user's usage and limits, when the installation has policies.
	Quota *Quota `json:"quota,omitempty"`
}

// Identity is who the user is, as Jupyter Server's IdentityProvider describes them.
type Identity struct {
	Username    string `json:"username"`
	Name        string `json:"name"`
	DisplayName string `json:"display_name"`
	Initials    string `json:"initials"`
	// AvatarURL and Color are null: nbkube has neither.
	AvatarURL *string `json:"avatar_url"`
	Color     *string `json:"color"`
}

// Quota is nbkube's addition to GET /api/status and /api/me: the user's usage against the
// limits of their UserPolicies. Absent when the installation has no policies.
type Quota struct {
	// Policies name the policies that govern the user.
	Policies []string `json:"policies"`
	// Usage is what the user's kernels and running clusters take.
	Usage QuotaAmounts `json:"usage"`
	// Limits are the user's limits; a null field is no limit.
	Limits QuotaAmounts `json:"limits"`
	// KernelSpecs are the kernel specs the user may start; null means all.
	KernelSpecs []string `json:"kernel_specs"`
}

// QuotaAmounts are counts and resource quantities ("500m", "2Gi") of a Quota.
type QuotaAmounts struct {
	Kernels   *int64  `json:"kernels"`
	Engines   *int64  `json:"engines"`
	Terminals *int64  `json:"terminals"`
	CPU       *string `json:"cpu"`
	Memory    *string `json:"memory"`
	GPU       *string `json:"gpu"`
	// UploadBytes: the bytes of chunked uploads in progress allowed (limits only).
	UploadBytes *int64 `json:"upload_bytes,omitempty"`
}
