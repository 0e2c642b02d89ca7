package main

import (
	"flag"
	"io"
	"testing"

	"github.com/nbkube/nbkube/internal/builder"
)

// parseBuilderFlags is the builder options that args make.
func parseBuilderFlags(args ...string) (builder.Options, error) {
	o := builder.DefaultOptions()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bindBuilderFlags(fs, &o)
	return o, fs.Parse(args)
}

func TestBuilderFlags_ScratchQuantities(t *testing.T) {
	o, err := parseBuilderFlags()
	if err != nil || o.ScratchSize.String() != "1Gi" || o.ScratchRequest.String() != "64Mi" {
		t.Fatalf("defaults: %v %v %v", o.ScratchSize.String(), o.ScratchRequest.String(), err)
	}
	o, err = parseBuilderFlags("--scratch-size=2Gi", "--scratch-request=0")
	if err != nil || o.ScratchSize.String() != "2Gi" || !o.ScratchRequest.IsZero() {
		t.Fatalf("set: %v %v %v", o.ScratchSize.String(), o.ScratchRequest.String(), err)
	}
	for _, bad := range []string{"--scratch-size=-1Gi", "--scratch-request=lots"} {
		if _, err := parseBuilderFlags(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// The agents' memory budget is a quantity, unset (the agent's default) unless given.
func TestBuilderFlags_AgentMemoryBudget(t *testing.T) {
	for args, want := range map[string]int64{"": 0, "--agent-memory-budget=128Mi": 128 << 20} {
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		if o, err := parseBuilderFlags(argv...); err != nil || o.AgentMemoryBudget.Value() != want {
			t.Errorf("%q: budget %s, want %d (%v)", args, o.AgentMemoryBudget.String(), want, err)
		}
	}
}

// Claims per user are off unless given, and a template that makes no object name is refused
// at start rather than at the first kernel.
func TestBuilderFlags_HomeClaim(t *testing.T) {
	if o, err := parseBuilderFlags(); err != nil || o.HomeClaims.On() {
		t.Fatalf("default: on %v, %v", o.HomeClaims.On(), err)
	}
	if o, err := parseBuilderFlags("--home-claim=home-{username}"); err != nil || o.HomeClaims.String() != "home-{username}" {
		t.Fatalf("set: %q, %v", o.HomeClaims.String(), err)
	}
	for _, bad := range []string{"--home-claim=home", "--home-claim=Home_{username}"} {
		if _, err := parseBuilderFlags(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
