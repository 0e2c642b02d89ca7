package events

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestValidate_TheRegisteredSchemasAndNothingElse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schemaID string
		version  int
		data     map[string]any
		ok       bool
	}{
		{"a kernel start", KernelActions, 1, map[string]any{"action": "start", "kernel_id": "k", "kernel_name": "python3", "status": "success", "msg": "started"}, true},
		{"an unknown action", KernelActions, 1, map[string]any{"action": "explode", "msg": "x"}, false},
		{"no msg", KernelActions, 1, map[string]any{"action": "start"}, false},
		{"a save", ContentsService, 1, map[string]any{"action": "save", "path": "a.ipynb"}, true},
		{"a rename", ContentsService, 1, map[string]any{"action": "rename", "path": "b", "source_path": "a"}, true},
		{"a path that is no string", ContentsService, 1, map[string]any{"action": "save", "path": 3}, false},
		{"nbkube's own", KernelStatus, 1, map[string]any{"action": "died", "kernel_id": "k", "reason": "OOMKilled"}, true},
		{"another version", ContentsService, 2, map[string]any{"action": "save", "path": "a"}, false},
		{"an unknown schema", "https://example.com/x/v1", 1, map[string]any{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.schemaID, tc.version, tc.data)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestBus_ASubscriberGetsWhatItMaySeeAndAFullOneMissesRatherThanBlocks(t *testing.T) {
	b := NewBus()
	ann := b.Subscribe(func(owner string) bool { return owner == "ann" })
	defer ann.Close()
	admin := b.Subscribe(func(string) bool { return true })
	defer admin.Close()
	if err := b.Emit("ben", ContentsService, map[string]any{"action": "save", "path": "ben.txt"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Emit("ann", ContentsService, map[string]any{"action": "delete", "path": "ann.txt"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Emit("ann", ContentsService, map[string]any{"action": "nope", "path": "x"}); err == nil {
		t.Error("an invalid event was emitted")
	}
	got := <-ann.C
	if got.Data["path"] != "ann.txt" || len(ann.C) != 0 {
		t.Errorf("ann got %+v and %d more, want only her own event", got, len(ann.C))
	}
	if len(admin.C) != 2 {
		t.Errorf("the admin got %d events, want both", len(admin.C))
	}
	var wire map[string]any
	data, _ := json.Marshal(got)
	if err := json.Unmarshal(data, &wire); err != nil {
		t.Fatal(err)
	}
	if wire["schema_id"] != ContentsService || wire["version"] != float64(1) || wire["action"] != "delete" || wire["path"] != "ann.txt" {
		t.Errorf("on the wire %s", data)
	}
	if _, err := time.Parse(time.RFC3339Nano, wire["timestamp"].(string)); err != nil {
		t.Errorf("timestamp: %v", err)
	}

	slow := b.Subscribe(func(string) bool { return true })
	defer slow.Close()
	done := make(chan struct{})
	go func() {
		for range subscriberBuffer + 10 {
			b.Publish(Event{SchemaID: ContentsService, Version: 1, Data: map[string]any{"action": "get", "path": "p"}, Owner: "ann"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a subscriber that reads nothing blocked the bus")
	}
	if slow.Dropped() != 10 {
		t.Errorf("dropped %d, want 10", slow.Dropped())
	}
}
