// Package agentapi is the contract between the API server and controllers on one side and
// the nbkube agent in every kernel pod on the other: what the pod builder puts in the pod
// (the agent's binary, environment, port and Secret keys), what the agent serves (its HTTP
// paths, query parameters and status report, the execution states it reports) and so what
// the agent client calls. Both sides take every name from here, so that neither can drift
// from the other.
//
// It imports the standard library only: the agent is a small static binary that must not
// carry the Kubernetes client along with the contract.
package agentapi

import (
	"fmt"
	"time"
)

// BinaryName is the agent's binary: in the operator's image beside the nbkube binary, and in
// kernel pods, which run it as their main container's command.
const BinaryName = "nbkube-agent"

// CommandInstall is the argument that makes the agent's binary (or nbkube) copy itself to a
// destination (`nbkube-agent install DEST`): what a kernel pod's init container runs.
const CommandInstall = "install"

// CommandCheck makes the agent exit at once with success (`nbkube-agent check`): the image
// puller's init containers run it in each kernel image, which shows the image is on the node
// and runs the agent.
const CommandCheck = "check"

// CommandPause makes the agent wait for SIGTERM and exit (`nbkube-agent pause`): the image
// puller's one container, which keeps its pod (and so the node's images) in place.
const CommandPause = "pause"

// Port is where the agent in a kernel pod listens: the builder sets it in EnvAgentPort and
// names it in the pod's ports and probes, and the API server and controllers dial it at the
// pod's IP.
const Port = 8777

// IPyKernelCommand tells ipykernel's command line, `<python> -m ipykernel_launcher ...`: the
// kernels the local node's fork server can fork (EnvForkServer).
func IPyKernelCommand(argv []string) bool {
	return len(argv) >= 3 && argv[1] == "-m" && argv[2] == "ipykernel_launcher"
}

// EnvPrefix starts the name of every variable of the agent's environment. A kernel's own env
// may not set such names, and the agent does not pass them on to the kernel process.
const EnvPrefix = "NBKUBE_"

// Environment variables the builder sets in the kernel container and the agent reads.
const (
	// EnvKernelID names the kernel (the Kernel resource).
	EnvKernelID = EnvPrefix + "KERNEL_ID"
	// EnvNamespace is the kernel pod's namespace.
	EnvNamespace = EnvPrefix + "NAMESPACE"
	// EnvPodIP is the pod's IP, the address the agent listens on.
	EnvPodIP = EnvPrefix + "POD_IP"
	// EnvAgentPort is the agent's port, Port.
	EnvAgentPort = EnvPrefix + "AGENT_PORT"
	// EnvSecretDir is where the kernel's Secret is mounted; the agent reads SecretKeyHMAC and
	// SecretKeyToken from the files of that name in it.
	EnvSecretDir = EnvPrefix + "SECRET_DIR"
	// EnvInterruptMode is the kernel spec's interrupt_mode: "signal" or "message".
	EnvInterruptMode = EnvPrefix + "INTERRUPT_MODE"
	// EnvTerminationLog is the container's terminationMessagePath, where the agent writes why
	// a kernel did not start.
	EnvTerminationLog = EnvPrefix + "TERMINATION_LOG"
	// EnvForkServer is the socket of the local node's kernel fork server, which forks a kernel
	// from an interpreter that imported ipykernel already; set by `nbkube local`'s node only.
	EnvForkServer = EnvPrefix + "FORK_SERVER"
	// EnvClusterProfile names the ipyparallel cluster a kernel is attached to.
	EnvClusterProfile = EnvPrefix + "IPCLUSTER_PROFILE"
	// EnvClusterFile is the client connection file of that cluster (in a Secret volume).
	EnvClusterFile = EnvPrefix + "IPCLUSTER_FILE"
	// EnvKernelPath is where the kernel starts, relative to its contents directory (the
	// Kernel's spec.path, "" for the directory itself): the agent finds the contents
	// directory, in which the notebooks of QueryNotebook are, by going up that far from its
	// working directory.
	EnvKernelPath = EnvPrefix + "KERNEL_PATH"
)

// Keys of the kernel's Secret, which the controllers write and the agent reads from its
// mounted files.
const (
	// SecretKeyHMAC holds the kernel's message-signing key.
	SecretKeyHMAC = "key"
	// SecretKeyToken holds the token that the agent asks of every caller but the kubelet's
	// probes; only the API server and the controllers read it.
	SecretKeyToken = "token"
)

// AuthScheme is the Authorization scheme that carries the agent token
// ("Authorization: Bearer <token>"). The agent also takes Jupyter's "token" scheme.
const AuthScheme = "Bearer"

// The agent's HTTP paths. Only the probes need no token.
const (
	// PathHealthz (GET) answers 200 while the agent serves: the liveness probe.
	PathHealthz = "/healthz"
	// PathReadyz (GET) answers 200 once the kernel has answered, 503 before: the readiness
	// probe. QueryWait with a duration holds the answer until the kernel is ready, at most
	// that long.
	PathReadyz = "/readyz"
	// PathStatus (GET) reports a Status. QueryWait=WaitReady first waits until the kernel is
	// ready, as long as the request lasts.
	PathStatus = "/status"
	// PathChannels (GET) is the kernel's channels WebSocket; see the Query parameters.
	PathChannels = "/channels"
	// PathInterrupt (POST) interrupts the running cell.
	PathInterrupt = "/interrupt"
	// PathRestart (POST) restarts the kernel process and answers once the new one is ready.
	PathRestart = "/restart"
	// PathShutdown (POST) shuts the kernel down and ends the agent.
	PathShutdown = "/shutdown"
	// PathWorkDir (POST) moves the kernel to another working directory; its body is a
	// WorkDir of at most MaxWorkDirBytes. It answers 204 once the kernel is there. Refusals
	// carry an ErrorBody: 400 for a bad body, 413 for one too large, 409 while the kernel is
	// not running (starting, restarting, dead, shutting down), 422 when Dir is no directory
	// or Code failed (the message carries the exception's name and value), 504 when the
	// kernel did not answer Code in time. A refused move changes nothing for later restarts.
	PathWorkDir = "/workdir"
	// PathNotebook (POST) tells the agent that a notebook its clients name (QueryNotebook)
	// was renamed: its body is a NotebookMove of at most 64 KiB. The connections that named
	// From, and the runs recorded for it, write into To from then on. 204, or 400 with an
	// ErrorBody for a bad body.
	PathNotebook = "/notebook"
	// PathExecute (POST) runs cells of a notebook with no client (server-side execution):
	// its body is an Execute of at most MaxExecuteBytes. The agent sends each cell's
	// execute_request to the kernel at once (the kernel runs its shell requests in order)
	// and writes the outputs into the notebook as a recorded run whose client is away. 204
	// once the cells are sent; 400 with an ErrorBody for a bad body; 408 when
	// PreviousRequestID was not sent within ExecuteOrderWait; 409 while the kernel is not
	// running.
	PathExecute = "/execute"
)

// Execute is the body of a PathExecute request.
type Execute struct {
	// Notebook is the notebook of the cells, as QueryNotebook gives it.
	Notebook string        `json:"notebook"`
	Cells    []ExecuteCell `json:"cells"`
	// RequestID, when set, names the request: a later one may ask to come after it, and the
	// execute_request of each cell has the msg_id ExecuteMsgID(RequestID, cell), so that a
	// client follows the runs on IOPub.
	RequestID string `json:"request_id,omitempty"`
	// PreviousRequestID is a request whose cells must be sent first.
	PreviousRequestID string `json:"previous_request_id,omitempty"`
}

// ExecuteCell is one cell to run: its id in the notebook and the code it holds.
type ExecuteCell struct {
	CellID string `json:"cell_id"`
	Code   string `json:"code"`
}

// MaxExecuteBytes bounds the body of a PathExecute request.
const MaxExecuteBytes = 16 << 20

// ExecuteOrderWait is how long a PathExecute request waits for its PreviousRequestID.
const ExecuteOrderWait = 10 * time.Second

// ExecuteMsgID is the msg_id of the execute_request of a cell of a named request.
func ExecuteMsgID(requestID, cellID string) string { return requestID + ":" + cellID }

// NotebookMove is the body of a PathNotebook request: two notebook paths as QueryNotebook
// gives them.
type NotebookMove struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// WorkDir is the body of a PathWorkDir request.
type WorkDir struct {
	// Dir is a directory relative to the one the kernel started in (the pod's working
	// directory; "." for it), clean and without "..": later incarnations of the kernel
	// (restarts, asked for or after it died) start in it. Relative, because only the agent
	// knows where the container's paths are: under `nbkube local` they are host directories.
	Dir string `json:"dir"`
	// Code, when not empty, is run in the current kernel process to move it to Dir, as a
	// silent execute_request that stores no history: it takes no execution count, and what
	// it publishes on iopub (busy, idle, a traceback) has the agent's request as parent, no
	// client's cell. The caller writes it in the kernel's language: the agent knows none.
	// Without it only later incarnations start in Dir.
	Code string `json:"code,omitempty"`
	// Env is added to the environment of later incarnations (Code sets it in the current
	// one): variable names, none of the agent's (EnvPrefix) and not HOME.
	Env map[string]string `json:"env,omitempty"`
}

// MaxWorkDirBytes bounds the body of a PathWorkDir request.
const MaxWorkDirBytes = 64 << 10

// Query parameters of the agent's paths.
const (
	// QueryWait holds a PathReadyz or PathStatus request; see there.
	QueryWait = "wait"
	// QuerySessionID names the client session of a PathChannels connection, which gets
	// what it missed while it was away.
	QuerySessionID = "session_id"
	// QueryChannel makes a PathChannels connection carry one channel only (shell, iopub,
	// stdin or control), as the older IPython interface's per-channel WebSockets do.
	QueryChannel = "channel"
	// QueryNotebook names the notebook of the kernel's session on a PathChannels connection,
	// relative to the kernel's contents directory (EnvKernelPath): the outputs of the cells
	// the connection's client runs (metadata.cellId) are written into it when the client is
	// away (docs/api.md, "Outputs that outlive the browser").
	QueryNotebook = "notebook"
)

// WaitReady is the QueryWait value that makes PathStatus wait until the kernel is ready.
const WaitReady = "ready"

// Status is what the agent reports on its kernel (PathStatus): the live fields of the
// kernel's model.
type Status struct {
	// ExecutionState is one of the Execution states.
	ExecutionState string `json:"execution_state"`
	// LastActivity is when the kernel last published on iopub for anything but the polls of
	// clients and the agent (kernel_info, comm_info), which must not keep it from being culled.
	LastActivity time.Time `json:"last_activity"`
	// Connections counts the clients connected to the channels.
	Connections int `json:"connections"`
	// RestartCount counts the kernel's restarts, asked for or after it died.
	RestartCount int `json:"restart_count"`
	// Ready tells that the kernel has answered once.
	Ready bool `json:"ready"`
	// ReplayBytes is what the agent holds for client sessions that are away, to replay when
	// they come back: the sizes of the kept messages' headers, metadata, content and buffers.
	// Connected sessions hold nothing; a session's bytes go when it returns or expires.
	ReplayBytes int64 `json:"replay_bytes"`
	// MemoryBytes is what the agent holds against its memory budget: ReplayBytes, the
	// frames queued for connected clients and the client messages held while the kernel
	// starts. Absent from agents older than this field.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// UnusedSince is when the agent started, while no client has connected to the channels
	// since; absent once one has (and from agents older than this field).
	UnusedSince *time.Time `json:"unused_since,omitempty"`
	// LastDeath is the kernel process's last death that nobody asked for, after which the
	// agent started it again (or gave up); absent when it never died (and from agents older
	// than this field). It tells an admin why RestartCount grew.
	LastDeath *Death `json:"last_death,omitempty"`
	// OutputsWritten is the agent's last write of the outputs of runs whose client was away
	// into their notebook; absent before its first (and from agents older than this field).
	OutputsWritten *OutputsWrite `json:"outputs_written,omitempty"`
}

// OutputsWrite is a write of the outputs of runs whose client was away into a notebook.
type OutputsWrite struct {
	// At is when the notebook was written.
	At time.Time `json:"at"`
	// Notebook is the notebook written, as QueryNotebook names it.
	Notebook string `json:"notebook"`
	// Cells counts the cells the write changed.
	Cells int `json:"cells"`
	// Writes counts this agent's writes so far, this one included: two reports of the same
	// write have the same count.
	Writes int64 `json:"writes"`
}

// Death is how a kernel process ended without being asked to.
type Death struct {
	// At is when the agent saw the process end.
	At time.Time `json:"at"`
	// ExitCode is the process's exit code, or 128 + the signal that killed it, as a shell
	// and a container's status report it.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that killed the process (SIGKILL); empty when it exited.
	Signal string `json:"signal,omitempty"`
	// Restart is the RestartCount the restart after it was to bring the kernel to: a death
	// the agent gave up after is RestartCount + 1.
	Restart int `json:"restart"`
}

// String says how the process ended, for a condition's message.
func (d Death) String() string {
	if d.Signal != "" {
		return fmt.Sprintf("the kernel process was killed by %s (exit code %d)", d.Signal, d.ExitCode)
	}
	return fmt.Sprintf("the kernel process exited with code %d", d.ExitCode)
}

// Jupyter's execution states, as a kernel's status messages and the kernel model say them.
// The agent reports restarting while it replaces the kernel process, and dead when the kernel
// stopped answering its heartbeat or died for good.
const (
	ExecutionStarting   = "starting"
	ExecutionIdle       = "idle"
	ExecutionBusy       = "busy"
	ExecutionRestarting = "restarting"
	ExecutionDead       = "dead"
)

// ErrorBody is the JSON body of the agent's refusals (409 of PathInterrupt or PathRestart,
// those of PathWorkDir).
type ErrorBody struct {
	Message string `json:"message"`
}

// CommandRenderRST makes the agent's binary a reStructuredText renderer instead of a
// kernel's agent (`nbkube-agent render-rst [flags]`): what the renderer pods run, in the
// kernel image, for the older interface's /rstservice/render. It reads EnvPodIP,
// EnvAgentPort, EnvSecretDir (SecretKeyToken only) and EnvTerminationLog as a kernel's agent
// does, serves PathHealthz and PathReadyz without a token and PathRenderRST with it.
const CommandRenderRST = "render-rst"

// PathRenderRST (POST) renders its body, reStructuredText in UTF-8 of at most MaxRSTBytes,
// to the HTML document docutils' HTML writer makes (200, text/html), with file insertion and
// raw directives disabled. Refusals carry an ErrorBody: 400 for reST that docutils finds in
// error, 413 for a body that is too large, 503 when the renderer is busy, cannot run docutils
// or did not finish in time.
const PathRenderRST = "/rst/render"

// MaxRSTBytes bounds the reST of one PathRenderRST request.
const MaxRSTBytes = 1 << 20

// MaxRSTHTMLBytes bounds the HTML of one PathRenderRST answer: a renderer that would write
// more is stopped, and its callers read no more.
const MaxRSTHTMLBytes = 16 << 20

// CommandTerminal makes the agent's binary a terminal's agent instead of a kernel's
// (`nbkube-agent terminal [flags] -- SHELL ARGS...`): it runs the shell on a pseudo-terminal
// and serves it to terminado's clients. It reads EnvPodIP, EnvAgentPort, EnvSecretDir
// (SecretKeyToken only) and EnvTerminationLog as a kernel's agent does, serves PathHealthz and
// PathReadyz without a token, and PathStatus (a TerminalStatus), PathTerminal and
// PathShutdown with it. It exits when the shell has ended.
const CommandTerminal = "terminal"

// PathTerminal (GET) is the terminal's WebSocket, speaking terminado's JSON messages.
const PathTerminal = "/terminal"

// TerminalStatus is what a terminal's agent reports on PathStatus.
type TerminalStatus struct {
	// LastActivity is when a client last typed or the shell last printed.
	LastActivity time.Time `json:"last_activity"`
	// Connections is how many clients are attached.
	Connections int `json:"connections"`
}
