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
}

// Me is the body of GET /api/me, Jupyter Server 2's identity endpoint.
type Me struct {
	Identity Identity `json:"identity"`
	// Permissions maps a resource to the actions the user may take on it; {} when none
	// were asked for.
	Permissions map[string][]string `json:"permissions"`
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
