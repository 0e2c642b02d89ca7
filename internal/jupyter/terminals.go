package jupyter

// Terminal is the model of a terminal, as Jupyter Server's terminal manager answers it.
type Terminal struct {
	Name         string `json:"name"`
	LastActivity Time   `json:"last_activity"`
}

// StartTerminal is the body of POST /api/terminals.
type StartTerminal struct {
	// Name asks for a terminal of that name; the user's terminal of that name, when there is
	// one, is the answer.
	Name string `json:"name"`
	// Cwd is the shell's working directory, relative to the user's root.
	Cwd string `json:"cwd"`
	// KernelName names the kernel spec whose image and resources the terminal's pod takes
	// (nbkube's; Jupyter's terminals run on the server's own machine).
	KernelName string `json:"kernel_name"`
}
