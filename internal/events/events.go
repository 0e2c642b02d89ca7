// Package events is nbkube's event bus, Jupyter Server 2's (jupyter_events): structured events
// of registered JSON schemas, emitted by the server (a kernel started, a file saved) or posted by
// clients (POST /api/events), and streamed to subscribers (WS /api/events/subscribe). Every
// event has the user whose resource it is about; a subscriber sees the events of its user, an
// admin's all of them.
package events

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema ids of the events the server emits.
const (
	// KernelActions is Jupyter Server 2's kernel_actions schema: start, interrupt, restart and
	// shutdown, with how they went.
	KernelActions = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"
	// ContentsService is Jupyter Server 2's contents_service schema: get, create, save, upload,
	// rename, copy and delete of a path.
	ContentsService = "https://events.jupyter.org/jupyter_server/contents_service/v1"
	// KernelStatus is nbkube's own: what happened to a kernel that only nbkube knows.
	KernelStatus = "https://events.nbkube.io/kernel_status/v1"
)

//go:embed schemas/*.json
var schemaFiles embed.FS

// registered are the schemas events may have, compiled, by id; each is of version 1.
var registered = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	ids := map[string]string{
		KernelActions:   "schemas/kernel_actions.v1.json",
		ContentsService: "schemas/contents_service.v1.json",
		KernelStatus:    "schemas/kernel_status.v1.json",
	}
	for id, file := range ids {
		data, err := schemaFiles.ReadFile(file)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if err := c.AddResource(id, doc); err != nil {
			return nil, err
		}
	}
	out := make(map[string]*jsonschema.Schema, len(ids))
	for id := range ids {
		s, err := c.Compile(id)
		if err != nil {
			return nil, err
		}
		out[id] = s
	}
	return out, nil
})

// ErrInvalid is an event of no registered schema and version, or whose data its schema refuses.
var ErrInvalid = errors.New("invalid event")

// Event is one event.
type Event struct {
	SchemaID  string
	Version   int
	Timestamp time.Time
	// Data are the event's fields, valid for its schema.
	Data map[string]any
	// Owner is the user whose resource the event is about (or who posted it).
	Owner string
	// HereOnly keeps the event from the other replicas: one that another replica passed on
	// (it is not passed on again), or one that every replica tells of itself, from what its
	// own cache sees (each would otherwise hear it twice).
	HereOnly bool
}

// MarshalJSON is the event as subscribers get it: the schema, version and time, then the
// event's fields.
func (e Event) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(e.Data)+3)
	maps.Copy(m, e.Data)
	m["schema_id"] = e.SchemaID
	m["version"] = e.Version
	m["timestamp"] = e.Timestamp.UTC().Format(time.RFC3339Nano)
	return json.Marshal(m)
}

// Validate checks the event's schema, version and data.
func Validate(schemaID string, version int, data map[string]any) error {
	schemas, err := registered()
	if err != nil {
		return err
	}
	s, ok := schemas[schemaID]
	if !ok || version != 1 {
		return fmt.Errorf("%w: no schema %s of version %d is registered", ErrInvalid, schemaID, version)
	}
	// The validator takes JSON values as encoding/json decodes them into any.
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// subscriberBuffer bounds the events waiting for one subscriber; a subscriber that falls
// that far behind misses the events that do not fit (and is told how many).
const subscriberBuffer = 256

// Bus passes events to the subscribers of this process. Emit never blocks.
type Bus struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
	now  func() time.Time
}

// NewBus makes a bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}, now: time.Now} }

// Subscription receives the events its filter lets through, until Close.
type Subscription struct {
	C <-chan Event
	c chan Event
	// may says whether the subscriber may see an event of owner.
	may func(owner string) bool
	// localOnly subscriptions (other replicas') do not get HereOnly events.
	localOnly bool
	bus       *Bus
	dropped   int
}

// Subscribe starts a subscription that gets the events of the owners may allows.
func (b *Bus) Subscribe(may func(owner string) bool) *Subscription {
	return b.subscribe(may, false)
}

// SubscribeLocal subscribes to every event of this process but the HereOnly ones: what
// another replica relays to its own subscribers.
func (b *Bus) SubscribeLocal() *Subscription {
	return b.subscribe(func(string) bool { return true }, true)
}

func (b *Bus) subscribe(may func(owner string) bool, localOnly bool) *Subscription {
	c := make(chan Event, subscriberBuffer)
	s := &Subscription{C: c, c: c, may: may, localOnly: localOnly, bus: b}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	delete(s.bus.subs, s)
	s.bus.mu.Unlock()
}

// Dropped is how many events did not fit in the subscription's buffer.
func (s *Subscription) Dropped() int {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.dropped
}

// Emit validates an event of the server and passes it on, when anyone subscribes. An event the
// schema refuses is a fault of the server: it is returned, and not passed on.
func (b *Bus) Emit(owner, schemaID string, data map[string]any) error {
	return b.emit(owner, schemaID, data, false)
}

// EmitHereOnly is Emit for an event that every replica tells of itself: this process's
// subscribers hear it, other replicas' do from their own.
func (b *Bus) EmitHereOnly(owner, schemaID string, data map[string]any) error {
	return b.emit(owner, schemaID, data, true)
}

func (b *Bus) emit(owner, schemaID string, data map[string]any, hereOnly bool) error {
	b.mu.Lock()
	none := len(b.subs) == 0
	b.mu.Unlock()
	if none {
		// Nobody hears it: not even checked, so that a server with no subscriber pays nothing.
		return nil
	}
	if err := Validate(schemaID, 1, data); err != nil {
		return err
	}
	b.Publish(Event{SchemaID: schemaID, Version: 1, Timestamp: b.now(), Data: data, Owner: owner, HereOnly: hereOnly})
	return nil
}

// Publish passes a valid event to the subscriptions that may see it.
func (b *Bus) Publish(e Event) {
	if e.Timestamp.IsZero() {
		e.Timestamp = b.now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if (e.HereOnly && s.localOnly) || !s.may(e.Owner) {
			continue
		}
		select {
		case s.c <- e:
		default:
			s.dropped++
		}
	}
}
