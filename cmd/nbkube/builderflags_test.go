package main

import (
	"flag"
	"io"
	"testing"

	"github.com/nbkube/nbkube/internal/builder"
)

func TestBuilderFlags_ScratchQuantities(t *testing.T) {
	parse := func(args ...string) (builder.Options, error) {
		o := builder.DefaultOptions()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		bindBuilderFlags(fs, &o)
		return o, fs.Parse(args)
	}
	o, err := parse()
	if err != nil || o.ScratchSize.String() != "1Gi" || o.ScratchRequest.String() != "64Mi" {
		t.Fatalf("defaults: %v %v %v", o.ScratchSize.String(), o.ScratchRequest.String(), err)
	}
	o, err = parse("--scratch-size=2Gi", "--scratch-request=0")
	if err != nil || o.ScratchSize.String() != "2Gi" || !o.ScratchRequest.IsZero() {
		t.Fatalf("set: %v %v %v", o.ScratchSize.String(), o.ScratchRequest.String(), err)
	}
	for _, bad := range []string{"--scratch-size=-1Gi", "--scratch-request=lots"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// The agents' memory budget is a quantity, unset (the agent's default) unless given.
func TestBuilderFlags_AgentMemoryBudget(t *testing.T) {
	for args, want := range map[string]int64{"": 0, "--agent-memory-budget=128Mi": 128 << 20} {
		o := builder.DefaultOptions()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		bindBuilderFlags(fs, &o)
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		if err := fs.Parse(argv); err != nil || o.AgentMemoryBudget.Value() != want {
			t.Errorf("%q: budget %s, want %d (%v)", args, o.AgentMemoryBudget.String(), want, err)
		}
	}
}
