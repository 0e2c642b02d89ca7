package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/identity"
)

// apiFlags are the API server's settings, shared by `manager` and `local`.
type apiFlags struct {
	listen, token, baseURL, root, cookieSecretFile string
	publicURL                                      string
	trustedProxies                                 []netip.Prefix
	defaultKernel                                  string
	terminals                                      bool
	terminalKernelSpec                             string
	maxBody, bodyMemory                            int64
	admissionWait                                  time.Duration
	readTimeout                                    time.Duration
	allowWeakToken                                 bool
	checkpoints                                    int
	alwaysDeleteDir                                bool
	deleteToTrash                                  bool
	trashMaxAge                                    time.Duration
	kernelStartTimeout, rateLimitWindow            time.Duration
	iopubMsgRate, iopubDataRate                    float64
	auth                                           authFlags
	userHome                                       homes.Template
	peersService                                   string
}

func (f *apiFlags) bind(fs *flag.FlagSet, listenDefault string) {
	fs.StringVar(&f.listen, "listen", listenDefault, "address of the Jupyter API server (empty: no API server)")
	fs.Func("token", "the `token` of the Jupyter API (default: $NBKUBE_TOKEN, else $JUPYTER_TOKEN, else the contents of $JUPYTER_TOKEN_FILE, else generated)", func(s string) error {
		if s == "" {
			// Jupyter's --token='' turns authentication off; nbkube has no such mode.
			return errors.New("nbkube always requires a token: leave --token out to have one generated")
		}
		f.token = s
		return nil
	})
	fs.BoolVar(&f.allowWeakToken, "allow-weak-token", false, fmt.Sprintf("accept a token shorter than %d characters (for tests only: a short token can be guessed)", minTokenLength))
	f.auth.bind(fs)
	fs.StringVar(&f.baseURL, "base-url", "/", "URL prefix of every route")
	fs.Func("trusted-proxies", "comma-separated addresses or CIDRs of TLS-terminating proxies (an Ingress controller) whose X-Forwarded-Proto is believed: what they forward over HTTPS gets Secure cookies and https addresses (default none)", func(s string) error {
		f.trustedProxies = nil
		for v := range strings.SplitSeq(s, ",") {
			if v = strings.TrimSpace(v); v == "" {
				continue
			}
			p, err := netip.ParsePrefix(v)
			if err != nil {
				a, aerr := netip.ParseAddr(v)
				if aerr != nil {
					return fmt.Errorf("%q is no address or CIDR", v)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			f.trustedProxies = append(f.trustedProxies, p.Masked())
		}
		return nil
	})
	fs.StringVar(&f.publicURL, "public-url", "", "the server's origin as browsers reach it, e.g. https://nbkube.example.com: browser logins (jupyterhub, oidc) come back to <public-url><base-url>oauth_callback, the redirect URI to register with the provider (default: the address of each login's request)")
	fs.StringVar(&f.root, "root", ".", "contents root: the notebooks, and the working directory tree of kernels")
	fs.Func("user-home", "`template` of each user's home on the contents volume, e.g. {username} or users/{username}: a user who is not an admin sees only their home, and their kernels mount only it (default: off, every user sees the whole volume)", func(s string) error {
		t, err := homes.Parse(s)
		f.userHome = t
		return err
	})
	fs.StringVar(&f.cookieSecretFile, "cookie-secret-file", "", "file with the secret that signs login cookies (the same for every replica; created if missing)")
	fs.StringVar(&f.peersService, "peers-service", "", "the API server's Service (in --namespace), whose other endpoints are this replica's peers: a subscriber of /api/events/subscribe hears what is caused through any replica (port named http; this replica is $POD_IP; empty: no peers)")
	fs.StringVar(&f.defaultKernel, "default-kernel-name", "python3", "kernel spec started when a request names none, Jupyter's default_kernel_name")
	fs.BoolVar(&f.terminals, "terminals", true, "serve Jupyter's terminals (/api/terminals): shells in pods of their users', as kernels run (false: the terminal routes answer 404, as Jupyter Server's without terminals)")
	fs.StringVar(&f.terminalKernelSpec, "terminal-kernel-spec", "", "kernel spec whose image and resources a terminal runs in when its start names none, for the users whose policies allow it (default: the user's default kernel spec)")
	fs.Int64Var(&f.maxBody, "max-body-size", apiserver.DefaultMaxBodyBytes, "largest request body in bytes")
	fs.Int64Var(&f.bodyMemory, "body-memory", defaultBodyMemory(os.Getenv), "bytes the request bodies being handled at once may hold, each counted as 4 times its length: a request with a body waits for room before it is read (default: a quarter of the container's memory limit, else 512 MiB)")
	f.admissionWait = apiserver.DefaultAdmissionWait
	durationFlag(fs, &f.admissionWait, "admission-wait", false, "how long a request with a body waits for room in --body-memory before it gets 503 with Retry-After")
	f.readTimeout = apiserver.DefaultReadTimeout
	durationFlag(fs, &f.readTimeout, "read-timeout", false, "how long a request may take to arrive, its body included: a client still sending gets 408 and is disconnected (the work after the body, WebSockets and downloads are not bounded)")
	fs.IntVar(&f.checkpoints, "max-checkpoints", 5, "checkpoints kept per file (oldest dropped)")
	fs.BoolVar(&f.deleteToTrash, "delete-to-trash", true, "DELETE moves files and directories to the user's trash (restorable through /api/trash), Jupyter's delete_to_trash; false deletes for good")
	fs.BoolVar(&f.alwaysDeleteDir, "always-delete-dir", false, "with --delete-to-trash=false, let DELETE remove directories with contents for good, Jupyter's always_delete_dir")
	f.trashMaxAge, f.kernelStartTimeout, f.rateLimitWindow = 30*24*time.Hour, 5*time.Minute, agentapi.DefaultRateLimits.Window
	durationFlag(fs, &f.trashMaxAge, "trash-max-age", true, "how long a trash entry is kept before it is deleted for good (0: until its user deletes it)")
	durationFlag(fs, &f.kernelStartTimeout, "kernel-start-timeout", false, "how long a kernel start may take (image pulls included) before it fails")
	fs.Float64Var(&f.iopubMsgRate, "iopub-msg-rate-limit", agentapi.DefaultRateLimits.MsgRate, "iopub messages per second a client gets before output is dropped (0: no limit), Jupyter's iopub_msg_rate_limit")
	fs.Float64Var(&f.iopubDataRate, "iopub-data-rate-limit", agentapi.DefaultRateLimits.DataRate, "stream output bytes per second a client gets before output is dropped (0: no limit), Jupyter's iopub_data_rate_limit")
	durationFlag(fs, &f.rateLimitWindow, "rate-limit-window", false, "time window of the iopub rate limits, Jupyter's rate_limit_window")
}

// minTokenLength is the shortest token the API server takes without --allow-weak-token:
// 32 characters, as many as 128 random bits in hex, beyond guessing; the generated ones are
// 48.
const minTokenLength = 32

// resolveToken takes the flag, then $NBKUBE_TOKEN (so that a Secret can provide it without
// putting it on the command line), then Jupyter Server's $JUPYTER_TOKEN and $JUPYTER_TOKEN_FILE
// in Jupyter's order, then a fresh random token. As in Jupyter, an empty variable counts as
// unset. Unlike Jupyter, the file's final line break is not part of the token (`echo token >
// file` makes such files), and a file without a token is refused, where Jupyter would run
// without authentication. Unlike Jupyter too, a token shorter than minTokenLength is refused
// unless --allow-weak-token, when the token provider is on: it guards the API, and
// everything a kernel can do.
func (f *apiFlags) resolveToken() (string, error) {
	t, source, err := f.givenToken()
	switch {
	case err != nil:
		return "", err
	case t == "":
		return randomHex(24)
	}
	if n := utf8.RuneCountInString(t); n < minTokenLength && !f.allowWeakToken && f.auth.has(identity.KindToken) {
		return "", fmt.Errorf("the token of %s has %d characters, and one that guards the API needs at least %d characters: "+
			"give a longer one (openssl rand -hex 24 makes one), leave it out to have one generated, "+
			"or, for tests, pass --allow-weak-token", source, n, minTokenLength)
	}
	return t, nil
}

// givenToken is the token given by the flag or the environment and where it comes from;
// empty when none is.
func (f *apiFlags) givenToken() (token, source string, err error) {
	if f.token != "" {
		return f.token, "--token", nil
	}
	for _, name := range []string{"NBKUBE_TOKEN", "JUPYTER_TOKEN"} {
		if t := os.Getenv(name); t != "" {
			return t, "$" + name, nil
		}
	}
	if path := os.Getenv("JUPYTER_TOKEN_FILE"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", "", fmt.Errorf("JUPYTER_TOKEN_FILE: %w", err)
		}
		t := strings.TrimRight(string(data), "\r\n")
		if t == "" {
			return "", "", fmt.Errorf("JUPYTER_TOKEN_FILE %s holds no token, and nbkube never runs without one", path)
		}
		return t, "$JUPYTER_TOKEN_FILE (" + path + ")", nil
	}
	return "", "", nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// cookieSecret reads the secret, creating it when the file does not exist yet.
func cookieSecret(path string) ([]byte, error) {
	read := func() ([]byte, error) {
		data, err := os.ReadFile(path)
		if err == nil && len(data) < 32 {
			return nil, fmt.Errorf("cookie secret %s is shorter than 32 bytes", path)
		}
		return data, err
	}
	return readOrMakeSecret(path, read, func() ([]byte, error) {
		secret := make([]byte, 64)
		_, err := rand.Read(secret)
		return secret, err
	})
}

// readOrMakeSecret reads a secret with read, or, when there is no file at path, writes one
// that generate makes there, readable by this user only. A file made at the same moment by
// another process (a replica, a second start) wins, and is read.
func readOrMakeSecret(path string, read, generate func() ([]byte, error)) ([]byte, error) {
	data, err := read()
	if !errors.Is(err, fs.ErrNotExist) {
		return data, err
	}
	secret, err := generate()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return read()
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(secret); err != nil {
		f.Close()
		return nil, err
	}
	return secret, f.Close()
}

func (f *apiFlags) contentsStore() (*contents.Store, error) {
	root, err := filepath.Abs(f.root)
	if err != nil {
		return nil, err
	}
	return contents.New(root, contents.Options{
		MaxCheckpoints:     f.checkpoints,
		DeletePermanently:  !f.deleteToTrash,
		DeleteNonEmptyDirs: f.alwaysDeleteDir,
		TrashMaxAge:        f.trashMaxAge,
	})
}
