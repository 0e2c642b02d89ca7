package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
)

// longToken is a token called name, long enough to be accepted.
func longToken(name string) string { return name + "-" + strings.Repeat("0123456789", 4) }

func TestResolveToken_FollowsJupyterServerPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(longToken("from-file")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flagTok, nb, jt := longToken("flag"), longToken("nb"), longToken("jt")
	tests := []struct {
		name       string
		flag       string
		env        map[string]string
		want       string
		wantRandom bool
	}{
		{name: "the flag wins", flag: flagTok, env: map[string]string{"NBKUBE_TOKEN": nb, "JUPYTER_TOKEN": jt, "JUPYTER_TOKEN_FILE": file}, want: flagTok},
		{name: "NBKUBE_TOKEN before Jupyter's", env: map[string]string{"NBKUBE_TOKEN": nb, "JUPYTER_TOKEN": jt}, want: nb},
		{name: "JUPYTER_TOKEN before the file", env: map[string]string{"JUPYTER_TOKEN": jt, "JUPYTER_TOKEN_FILE": file}, want: jt},
		{name: "the file's token, without its final newline", env: map[string]string{"JUPYTER_TOKEN_FILE": file}, want: longToken("from-file")},
		{name: "an empty JUPYTER_TOKEN is unset, as in Jupyter", env: map[string]string{"JUPYTER_TOKEN": "", "JUPYTER_TOKEN_FILE": file}, want: longToken("from-file")},
		{name: "nothing: generated", env: map[string]string{"JUPYTER_TOKEN": ""}, wantRandom: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, name := range []string{"NBKUBE_TOKEN", "JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE"} {
				t.Setenv(name, tt.env[name])
			}
			var args []string
			if tt.flag != "" {
				args = append(args, "--token="+tt.flag)
			}
			f, err := parseAuth(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.resolveToken()
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantRandom {
				if len(got) != 48 {
					t.Errorf("token %q, want 48 random hex digits", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("token %q, want %q", got, tt.want)
			}
		})
	}
}

// A token anyone could guess is refused at the start, wherever it comes from, with a message
// that says how to get past it; tests may ask for it with --allow-weak-token. A token that
// proves nothing (no token provider in --auth) is not checked.
func TestResolveToken_RefusesAShortTokenUnlessAllowed(t *testing.T) {
	short := strings.Repeat("x", minTokenLength-1)
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(short+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sources := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{name: "--token", args: []string{"--token=" + short}},
		{name: "$NBKUBE_TOKEN", env: map[string]string{"NBKUBE_TOKEN": short}},
		{name: "$JUPYTER_TOKEN", env: map[string]string{"JUPYTER_TOKEN": short}},
		{name: "$JUPYTER_TOKEN_FILE", env: map[string]string{"JUPYTER_TOKEN_FILE": file}},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			for _, name := range []string{"NBKUBE_TOKEN", "JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE"} {
				t.Setenv(name, src.env[name])
			}
			resolve := func(extra ...string) (string, error) {
				f, err := parseAuth(t, append(slices.Clone(src.args), extra...)...)
				if err != nil {
					t.Fatal(err)
				}
				return f.resolveToken()
			}
			tok, err := resolve()
			if err == nil {
				t.Fatalf("token %q of %d characters accepted", tok, len(tok))
			}
			for _, want := range []string{src.name, "at least 32 characters", "--allow-weak-token"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal %q does not say %q", err, want)
				}
			}
			if tok, err := resolve("--allow-weak-token"); err != nil || tok != short {
				t.Errorf("with --allow-weak-token: %q, %v", tok, err)
			}
			if tok, err := resolve("--auth=users"); err != nil || tok != short {
				t.Errorf("without the token provider: %q, %v", tok, err)
			}
		})
	}
	t.Run("32 characters are enough", func(t *testing.T) {
		t.Setenv("NBKUBE_TOKEN", "")
		t.Setenv("JUPYTER_TOKEN", "")
		t.Setenv("JUPYTER_TOKEN_FILE", "")
		enough := strings.Repeat("x", minTokenLength)
		f, err := parseAuth(t, "--token="+enough)
		if err != nil {
			t.Fatal(err)
		}
		if tok, err := f.resolveToken(); err != nil || tok != enough {
			t.Errorf("%q, %v", tok, err)
		}
	})
}

// --read-timeout is Jupyter-style seconds or a Go duration, five minutes unless given, and
// never zero: a server without it is the one a trickling client holds.
func TestAPIFlags_ReadTimeout(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want time.Duration
	}{
		{want: apiserver.DefaultReadTimeout},
		{args: []string{"--read-timeout=90"}, want: 90 * time.Second},
		{args: []string{"--read-timeout=10m"}, want: 10 * time.Minute},
	} {
		f, err := parseAuth(t, tt.args...)
		if err != nil || f.readTimeout != tt.want {
			t.Errorf("%v: %s, %v; want %s", tt.args, f.readTimeout, err, tt.want)
		}
	}
	for _, bad := range []string{"--read-timeout=0", "--read-timeout=-1s", "--read-timeout=soon"} {
		if _, err := parseAuth(t, bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestResolveToken_NeverRunsWithoutOne(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ file, wantErr string }{
		{file: empty, wantErr: "JUPYTER_TOKEN_FILE " + empty + " holds no token"},
		{file: filepath.Join(dir, "missing"), wantErr: "JUPYTER_TOKEN_FILE: open " + filepath.Join(dir, "missing")},
	} {
		t.Setenv("NBKUBE_TOKEN", "")
		t.Setenv("JUPYTER_TOKEN", "")
		t.Setenv("JUPYTER_TOKEN_FILE", tt.file)
		f := apiFlags{}
		if tok, err := f.resolveToken(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("token %q, error %v; want an error with %q", tok, err, tt.wantErr)
		}
	}
	// Jupyter's --token='' turns authentication off; nbkube has no such mode and says so.
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f apiFlags
	f.bind(fs, "")
	if err := fs.Parse([]string{"--token="}); err == nil || !strings.Contains(err.Error(), "nbkube always requires a token") {
		t.Errorf("--token= gave %v, want a refusal", err)
	}
}

// --user-home is off unless given (nbkube local is one person's), and a template that could
// leave the volume or give users one home stops the start.
func TestUserHomeFlag_OffByDefaultAndChecked(t *testing.T) {
	parse := func(args ...string) (apiFlags, error) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f apiFlags
		f.bind(fs, "")
		return f, fs.Parse(args)
	}
	f, err := parse()
	if err != nil || f.userHome.On() {
		t.Fatalf("default: %v, on %v", err, f.userHome.On())
	}
	if f, err = parse("--user-home=users/{username}"); err != nil || f.userHome.String() != "users/{username}" {
		t.Fatalf("users/{username}: %v, %q", err, f.userHome.String())
	}
	for _, bad := range []string{"users", "../{username}", "/srv/{username}"} {
		if _, err := parse("--user-home=" + bad); err == nil {
			t.Errorf("--user-home=%s was accepted", bad)
		}
	}
}

// The server newAPIRunnable builds takes --read-timeout: a body trickled past it gets 408.
// The contents API needs no cluster, so none is given; nor does a users file, where the
// token provider would have the server's readiness asked of /api/status, which counts
// kernels in the cluster.
func TestAPIRunnable_CutsOffABodyTrickledPastTheReadTimeout(t *testing.T) {
	dir := t.TempDir()
	token, users := annUsersFile(t)
	f, err := parseAuth(t, "--read-timeout=1s", "--auth=users", "--users-file="+users, "--root="+dir,
		"--cookie-secret-file="+filepath.Join(t.TempDir(), "cookie"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The server registers its metrics with controller-runtime's registry, once per process:
	// this one has a registry of its own, so that other tests can build theirs.
	registry := ctrlmetrics.Registry
	ctrlmetrics.Registry = prometheus.NewRegistry()
	t.Cleanup(func() { ctrlmetrics.Registry = registry })
	urls := make(chan string, 1)
	r, err := newAPIRunnable(f, nil, nil, nil, nil, "default", nil, identity.User{Name: "admin", Admin: true}, nil, l, func(url string) { urls <- url })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-urls:
	case err := <-done:
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Half the body, and no more: the rest never comes.
	if _, err := fmt.Fprintf(conn, "PUT /api/contents/slow.txt HTTP/1.1\r\nHost: x\r\nAuthorization: token %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"type\": \"file\"", token); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", resp.StatusCode)
	}
}
