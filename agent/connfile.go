package agent

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
)

// ConnectionInfo is Jupyter's connection file.
type ConnectionInfo struct {
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	IP              string `json:"ip"`
	Key             string `json:"key"`
	Transport       string `json:"transport"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

// kernelIP is the address the kernel's ports are bound to: 127.0.0.1, private to the pod,
// unless the agent itself listens on a loopback address. Then the pod shares the host's
// network (the local node gives each pod its own 127.0.0.N), and the kernel takes the pod's
// address, so that kernels starting side by side never pick the same port.
func kernelIP(listen string) string {
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsLoopback() {
		return ip.String()
	}
	return "127.0.0.1"
}

// newConnectionInfo picks five free ports on ip. The kernel binds them right after; the
// short window in which another process could take one is Jupyter's own, accepted practice.
func newConnectionInfo(ip, key, kernelID string) (ConnectionInfo, error) {
	ports := make([]int, 5)
	listeners := make([]net.Listener, 0, 5)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return ConnectionInfo{}, fmt.Errorf("pick kernel port: %w", err)
		}
		listeners = append(listeners, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ConnectionInfo{
		ShellPort: ports[0], IOPubPort: ports[1], StdinPort: ports[2], ControlPort: ports[3], HBPort: ports[4],
		IP: ip, Key: key, Transport: "tcp", SignatureScheme: "hmac-sha256", KernelName: kernelID,
	}, nil
}

// write writes the connection file at path, readable by the agent's user only: it holds the
// kernel's key.
func (info ConnectionInfo) write(path string) error {
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write connection file: %w", err)
	}
	return nil
}

// substitute puts the connection file's path into the kernel's argv, as Jupyter does.
func substitute(args []string, connFile string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "{connection_file}", connFile)
	}
	return out
}
