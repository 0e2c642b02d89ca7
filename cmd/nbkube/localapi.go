package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/jpserver"
)

// defaultPort and defaultPortRetries are Jupyter Server's.
const (
	defaultPort        = 8888
	defaultPortRetries = 50
)

// localListenDefaults are where `nbkube local` serves without --listen, and how many more ports
// it tries when that one is taken: Jupyter's port (8888, or $JUPYTER_PORT) on the loopback
// address, and its port_retries (50, or $JUPYTER_PORT_RETRIES).
func localListenDefaults(getenv func(string) string) (listen string, retries int, err error) {
	port, retries := defaultPort, defaultPortRetries
	for name, p := range map[string]*int{"JUPYTER_PORT": &port, "JUPYTER_PORT_RETRIES": &retries} {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 65535 {
				return "", 0, fmt.Errorf("$%s=%q is not a number from 0 to 65535", name, v)
			}
			*p = n
		}
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), retries, nil
}

// listenLocal binds the API server's listener before anything else starts, so that a port in
// use is known at once. A port the user named (--listen) is the one they want: taken, it is
// an error, unless they asked for retries too. Without --listen the next free port is taken,
// as Jupyter does, and said.
func listenLocal(fs *flag.FlagSet, addr string, retries int, progress func(string, ...any)) (net.Listener, error) {
	named := isSet(fs, "listen")
	if named && !isSet(fs, "port-retries") {
		retries = 0
	}
	l, err := jpserver.Listen(addr, retries)
	switch {
	case err != nil && named:
		return nil, fmt.Errorf("%w: another program serves there; stop it, choose another address with --listen, "+
			"or leave --listen out to take the next free port", err)
	case err != nil:
		return nil, fmt.Errorf("%w: choose an address with --listen", err)
	}
	_, want, _ := net.SplitHostPort(addr)
	if got := strconv.Itoa(l.Addr().(*net.TCPAddr).Port); want != "0" && got != want {
		progress("port %s is in use: serving on port %s instead", want, got)
	}
	return l, nil
}

// isSet tells whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// writeRuntimeFile leaves the server info file of Jupyter's runtime directory for the API
// served at url (without the token) on addr, and returns its path.
func writeRuntimeFile(api *apiFlags, url string, addr net.Addr) (string, error) {
	dir, err := jpserver.RuntimeDir(os.Getenv)
	if err != nil {
		return "", err
	}
	hostname, _, err := net.SplitHostPort(api.listen)
	if err != nil {
		return "", err
	}
	if hostname == "" {
		hostname = "localhost"
	}
	return jpserver.Write(dir, jpserver.Info{
		URL:      url,
		Hostname: hostname,
		Port:     addr.(*net.TCPAddr).Port,
		BaseURL:  apiserver.NormalizeBaseURL(api.baseURL),
		Token:    api.token,
		RootDir:  api.root,
		PID:      os.Getpid(),
		// The version GET /api reports: clients that read the file compare it, as they do
		// that one.
		Version: apiserver.APIVersion,
	})
}
