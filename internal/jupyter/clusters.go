package jupyter

// Cluster is the model of /api/clusters and the older /clusters: IPython's cluster model
// (profile, profile_dir, status, n) and what nbkube adds. IPython listed n only for a
// running cluster; nbkube always lists it, the engines the cluster runs with.
type Cluster struct {
	// Profile is the cluster's name, the IPython profile kernels use it by.
	Profile string `json:"profile"`
	// ProfileDir is where a kernel attached to the cluster finds its profile.
	ProfileDir string `json:"profile_dir"`
	// Status is "running" or "stopped".
	Status string `json:"status"`
	N      int32  `json:"n"`

	ClusterID       string `json:"cluster_id"`
	EnginesReady    int32  `json:"engines_ready"`
	EnginesBusy     int32  `json:"engines_busy"`
	ControllerReady bool   `json:"controller_ready"`
	Ready           bool   `json:"ready"`
	// LastActivity is when a task last ran or finished, ISO 8601; null before the cluster ran.
	LastActivity *string `json:"last_activity"`
	// Reason and Message explain a cluster that cannot run (its Failed condition).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Owner is the user the cluster belongs to (nbkube's).
	Owner string `json:"owner,omitempty"`
	// Framework is what the cluster runs: "ipyparallel" or "dask" (nbkube's).
	Framework string `json:"framework"`
	// Tasks is the number of tasks a dask cluster's scheduler holds (nbkube's).
	Tasks *int64 `json:"tasks,omitempty"`
	// DashboardURL is where the server shows a dask cluster's scheduler dashboard to its
	// owner, a path under the server's base URL (nbkube's).
	DashboardURL string `json:"dashboard_url,omitempty"`
}

// FrameworkDask is the Framework of a dask cluster.
const FrameworkDask = "dask"

// ClusterStart is the optional body of a cluster's start: the number of engines.
type ClusterStart struct {
	N *int32 `json:"n"`
}

// ClusterCreate is the body of POST /api/clusters, nbkube's own: a new cluster's profile
// and its engines (two when absent). IPython had no such route: its clusters were the
// profiles on disk.
type ClusterCreate struct {
	Profile string `json:"profile"`
	N       *int32 `json:"n"`
	// Framework is "ipyparallel" (when absent) or "dask".
	Framework string `json:"framework"`
}
