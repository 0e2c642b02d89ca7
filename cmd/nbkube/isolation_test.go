package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestSandboxFlag_AutoSandboxesWhenSeveralUsersShareTheNode(t *testing.T) {
	for _, tc := range []struct {
		args             []string
		multi, sandboxed bool
	}{
		{args: nil, multi: false, sandboxed: false},
		{args: nil, multi: true, sandboxed: true},
		{args: []string{"--sandbox"}, multi: false, sandboxed: true},
		{args: []string{"--sandbox=auto"}, multi: true, sandboxed: true},
		{args: []string{"--sandbox=false"}, multi: true, sandboxed: false},
		{args: []string{"--sandbox=true"}, multi: false, sandboxed: true},
	} {
		fs := flag.NewFlagSet("local", flag.ContinueOnError)
		var m sandboxMode
		fs.Var(&m, "sandbox", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := m.enabled(tc.multi); got != tc.sandboxed {
			t.Errorf("%v with several users %v: sandboxed %v, want %v", tc.args, tc.multi, got, tc.sandboxed)
		}
	}
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var m sandboxMode
	fs.Var(&m, "sandbox", "")
	if err := fs.Parse([]string{"--sandbox=sometimes"}); err == nil {
		t.Error("--sandbox=sometimes was taken")
	}
}

func TestCheckIsolation_RefusesToShareUnisolatedPodsAmongUsers(t *testing.T) {
	cannot := func() error { return errors.New("clone: operation not permitted") }
	can := func() error { return nil }
	var said []string
	progress := func(format string, _ ...any) { said = append(said, format) }

	// Several users, a machine that cannot sandbox, no choice made: refused, saying why and
	// what to do.
	err := checkIsolation(sandboxMode{}, true, cannot, progress)
	if err == nil || !strings.Contains(err.Error(), "operation not permitted") || !strings.Contains(err.Error(), "--sandbox=false") {
		t.Fatalf("several users without sandboxes: %v", err)
	}
	// --sandbox asked for on such a machine: refused.
	if err := checkIsolation(sandboxMode{set: true, on: true}, false, cannot, progress); err == nil || !errors.Is(err, errNoSandbox) {
		t.Fatalf("--sandbox where none can be made: %v", err)
	}
	// One user: nothing to check, nothing said.
	if err := checkIsolation(sandboxMode{}, false, cannot, progress); err != nil || len(said) != 0 {
		t.Fatalf("one user: %v, said %q", err, said)
	}
	if err := checkIsolation(sandboxMode{}, true, can, progress); err != nil || len(said) != 0 {
		t.Fatalf("several users, sandboxes made: %v, said %q", err, said)
	}
	// Several users, sandboxes turned off on purpose: started, with a warning.
	if err := checkIsolation(sandboxMode{set: true}, true, cannot, progress); err != nil || len(said) != 1 || !strings.Contains(said[0], "warning") {
		t.Fatalf("--sandbox=false with several users: %v, said %q", err, said)
	}
}
