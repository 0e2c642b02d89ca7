package apiserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/events"
)

// Events across replicas. Each replica's bus has the events caused through it; a replica
// with subscribers of its own links to every other replica (WS /api/events/peers, signed
// with a key derived from the cookie secret, which every replica has) and passes what it
// hears there to its subscribers. The links are made before a subscription is answered, so
// that a subscriber hears what it causes through any replica from then on, and are closed a
// while after the last subscriber leaves: a replica nobody subscribes to costs its peers
// nothing.

const (
	// peerEventsPath is where a replica streams its own events to its peers.
	peerEventsPath = "api/events/peers"
	// peerLinkWait bounds how long a subscription waits for the links to the peers.
	peerLinkWait = 3 * time.Second
	// peerRefresh is how often the list of peers is read again while linked.
	peerRefresh = 5 * time.Second
	// peerLinger is how long the links stay after the last subscriber left: a page that
	// reloads does not make them again.
	peerLinger = time.Minute
	// peerClockSkew bounds the age of a link request's signature.
	peerClockSkew = 30 * time.Second
)

// Headers of a link request.
const (
	headerPeerTime      = "X-Nbkube-Peer-Time"
	headerPeerSignature = "X-Nbkube-Peer-Signature"
)

// peerEvent is an event on a link: the event and whose it is.
type peerEvent struct {
	SchemaID  string         `json:"schema_id"`
	Version   int            `json:"version"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
	Owner     string         `json:"owner"`
}

// peerKey is the key that signs link requests, derived from the cookie secret so that no
// cookie is ever signed with it.
func peerKey(cookieSecret []byte) []byte {
	m := hmac.New(sha256.New, cookieSecret)
	m.Write([]byte("nbkube events peers v1"))
	return m.Sum(nil)
}

// peerSignature signs a link request to path at unix time at.
func peerSignature(key []byte, path, at string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(path + "\n" + at))
	return hex.EncodeToString(m.Sum(nil))
}

// streamPeerEvents is WS /api/events/peers: this replica's own events, all users', to
// another replica that proves it has the installation's key.
func (s *Server) streamPeerEvents(c *gin.Context) error {
	at := c.GetHeader(headerPeerTime)
	sec, err := strconv.ParseInt(at, 10, 64)
	sent := time.Unix(sec, 0)
	now := s.opts.Clock.Now()
	if err != nil || sent.Before(now.Add(-peerClockSkew)) || sent.After(now.Add(peerClockSkew)) ||
		!hmac.Equal([]byte(c.GetHeader(headerPeerSignature)), []byte(peerSignature(s.peerKey, c.Request.URL.Path, at))) {
		return domainerr.Forbidden("Only the API server's replicas may link to its events")
	}
	if !websocket.IsWebSocketUpgrade(c.Request) {
		return domainerr.Invalid("a WebSocket upgrade is required")
	}
	sub := s.events.SubscribeLocal()
	defer sub.Close()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ws, err := up.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		return nil
	}
	defer func() { _ = ws.Close() }()
	s.streamEvents(ws, sub, nil, func(e events.Event) any {
		return peerEvent{SchemaID: e.SchemaID, Version: e.Version, Timestamp: e.Timestamp, Data: e.Data, Owner: e.Owner}
	})
	return nil
}

// peerLinks are this replica's links to the others' events.
type peerLinks struct {
	s     *Server
	peers func(context.Context) ([]string, error)

	mu     sync.Mutex
	users  int
	links  map[string]*peerLink
	stop   context.CancelFunc // of the refresher, nil when not linked
	linger *time.Timer
}

// peerLink is a link to one peer, made again whenever it breaks.
type peerLink struct {
	cancel context.CancelFunc
	up     chan struct{} // closed once it was first made
}

// acquire links to the peers for a new subscriber, waiting a while for the links; release
// says the subscriber left.
func (p *peerLinks) acquire(ctx context.Context) (release func()) {
	p.mu.Lock()
	p.users++
	if p.linger != nil {
		p.linger.Stop()
		p.linger = nil
	}
	if p.stop == nil {
		refreshCtx, stop := context.WithCancel(context.Background())
		p.stop = stop
		go p.refreshEvery(refreshCtx)
	}
	p.mu.Unlock()
	p.refresh(ctx)

	p.mu.Lock()
	ups := make([]chan struct{}, 0, len(p.links))
	for _, l := range p.links {
		ups = append(ups, l.up)
	}
	p.mu.Unlock()
	wait, cancel := context.WithTimeout(ctx, peerLinkWait)
	defer cancel()
	for _, up := range ups {
		select {
		case <-up:
		case <-wait.Done():
		}
	}
	var once sync.Once
	return func() { once.Do(p.release) }
}

func (p *peerLinks) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.users--
	if p.users > 0 || p.stop == nil {
		return
	}
	p.linger = time.AfterFunc(peerLinger, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.users > 0 || p.stop == nil {
			return
		}
		p.stop()
		p.stop = nil
		for addr, l := range p.links {
			l.cancel()
			delete(p.links, addr)
		}
	})
}

func (p *peerLinks) refreshEvery(ctx context.Context) {
	t := time.NewTicker(peerRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.refresh(ctx)
		}
	}
}

// refresh links to the peers listed now, and lets go of those no longer listed.
func (p *peerLinks) refresh(ctx context.Context) {
	addrs, err := p.peers(ctx)
	if err != nil {
		p.s.opts.Log.Error(err, "Cannot list the API server's replicas; events caused through others are not heard meanwhile")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop == nil {
		return
	}
	listed := make(map[string]bool, len(addrs))
	for _, addr := range addrs {
		listed[addr] = true
		if p.links[addr] == nil {
			linkCtx, cancel := context.WithCancel(context.Background())
			l := &peerLink{cancel: cancel, up: make(chan struct{})}
			p.links[addr] = l
			go p.run(linkCtx, addr, l)
		}
	}
	for addr, l := range p.links {
		if !listed[addr] {
			l.cancel()
			delete(p.links, addr)
		}
	}
}

// run keeps a link to the peer at addr until ctx ends, passing its events to this replica's
// subscribers.
func (p *peerLinks) run(ctx context.Context, addr string, l *peerLink) {
	var once sync.Once
	up := func() { once.Do(func() { close(l.up) }) }
	// A peer that cannot be reached does not hold the subscription that waits for it longer
	// than one attempt.
	defer up()
	for ctx.Err() == nil {
		err := p.follow(ctx, addr, up)
		up()
		if ctx.Err() != nil {
			return
		}
		p.s.opts.Log.V(1).Info("The link to a replica's events broke; linking again", "peer", addr, "error", err.Error())
		select {
		case <-ctx.Done():
		case <-time.After(time.Second + randomJitter()):
		}
	}
}

// follow reads the peer's events until the link breaks or ctx ends.
func (p *peerLinks) follow(ctx context.Context, addr string, up func()) error {
	path := p.s.opts.BaseURL + peerEventsPath
	at := strconv.FormatInt(p.s.opts.Clock.Now().Unix(), 10)
	h := http.Header{}
	h.Set(headerPeerTime, at)
	h.Set(headerPeerSignature, peerSignature(p.s.peerKey, path, at))
	dialCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ws, resp, err := websocket.DefaultDialer.DialContext(dialCtx, "ws://"+addr+path, h)
	if err != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		return err
	}
	up()
	stop := context.AfterFunc(ctx, func() { _ = ws.Close() })
	defer stop()
	defer func() { _ = ws.Close() }()
	ws.SetReadLimit(maxEventBytes + 4<<10)
	// The peer pings every eventsPing: a link that hears nothing for twice that is broken.
	_ = ws.SetReadDeadline(time.Now().Add(2 * eventsPing))
	ws.SetPingHandler(func(data string) error {
		_ = ws.SetReadDeadline(time.Now().Add(2 * eventsPing))
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(proxyWriteWait))
	})
	for {
		var e peerEvent
		if err := ws.ReadJSON(&e); err != nil {
			return err
		}
		p.s.events.Publish(events.Event{SchemaID: e.SchemaID, Version: e.Version, Timestamp: e.Timestamp, Data: e.Data, Owner: e.Owner, HereOnly: true})
	}
}

// randomJitter is up to half a second, so that replicas do not link again in step.
func randomJitter() time.Duration {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return time.Duration(int(b[0])<<8|int(b[1])) * (500 * time.Millisecond) / 65536
}
