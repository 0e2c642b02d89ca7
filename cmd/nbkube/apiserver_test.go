package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveToken_FollowsJupyterServerPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		flag       string
		env        map[string]string
		want       string
		wantRandom bool
	}{
		{name: "the flag wins", flag: "flag", env: map[string]string{"NBKUBE_TOKEN": "nb", "JUPYTER_TOKEN": "jt", "JUPYTER_TOKEN_FILE": file}, want: "flag"},
		{name: "NBKUBE_TOKEN before Jupyter's", env: map[string]string{"NBKUBE_TOKEN": "nb", "JUPYTER_TOKEN": "jt"}, want: "nb"},
		{name: "JUPYTER_TOKEN before the file", env: map[string]string{"JUPYTER_TOKEN": "jt", "JUPYTER_TOKEN_FILE": file}, want: "jt"},
		{name: "the file's token, without its final newline", env: map[string]string{"JUPYTER_TOKEN_FILE": file}, want: "from-file"},
		{name: "an empty JUPYTER_TOKEN is unset, as in Jupyter", env: map[string]string{"JUPYTER_TOKEN": "", "JUPYTER_TOKEN_FILE": file}, want: "from-file"},
		{name: "nothing: generated", env: map[string]string{"JUPYTER_TOKEN": ""}, wantRandom: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, name := range []string{"NBKUBE_TOKEN", "JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE"} {
				t.Setenv(name, tt.env[name])
			}
			f := apiFlags{token: tt.flag}
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
