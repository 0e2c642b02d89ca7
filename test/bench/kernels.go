package main

// The kernel scenarios speak the standard Jupyter Server API (POST/DELETE /api/kernels and the
// JSON protocol on /api/kernels/<id>/channels) to each server, and compare them with the floor:
// floor.py driving ipykernel over ZMQ with jupyter_client, no server in the way.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	_ "embed" // floor.py
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

//go:embed floor.py
var floorScript []byte

// The sizes of the kernel scenarios; together they take a minute or two per column.
const (
	// kernelStarts: a kernel's own start varies from one start to the next by more than the
	// start target's margin, so the p50 needs this many to be stable from run to run.
	kernelStarts      = 20
	roundTrips        = 500
	roundTripWarmup   = 20
	streamLines       = 20000
	concurrentKernels = 20
	// kernelTimeout bounds one kernel start, one execution and one HTTP call: twenty kernels
	// starting at once on two cores take tens of seconds.
	kernelTimeout = 2 * time.Minute
	// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every
	// Linux architecture Go supports.
	clockTicks = 100
)

// kernelScenario names a row of the kernel report.
type kernelScenario int

const (
	scStart kernelScenario = iota
	scRoundTrip
	scStream
	scConcurrent
	scDelete
	scRSS
	scCPU
)

// kernelResults is one column of the kernel report: what the scenarios measured on a server or
// on the floor. A scenario that could not run has its error in errs instead of a value.
type kernelResults struct {
	column                string
	start, del, roundTrip []time.Duration // sorted
	stream                streamResult
	concurrent            []time.Duration // sorted; one per round that worked
	rss                   rssResult
	cpu                   cpuResult
	errs                  map[kernelScenario]error
}

type streamResult struct {
	messages, lines int // stream messages of the request, and the lines of output they carried
	elapsed         time.Duration
}

type rssResult struct {
	perKernel float64 // bytes
	how       string
}

type cpuResult struct {
	perMessage time.Duration
	relayed    int    // messages through the proxy: the ones the client received and the one it sent
	how        string // where the time went
}

func newKernelResults(column string) *kernelResults {
	return &kernelResults{column: column, errs: map[kernelScenario]error{}}
}

// fail records err, when there is one, for the scenarios it stopped.
func (r *kernelResults) fail(err error, scs ...kernelScenario) {
	if err == nil {
		return
	}
	// The report's cells cut errors short; the whole of each goes to the log.
	fmt.Fprintf(os.Stderr, "%-8s error: %v\n", r.column, err)
	for _, sc := range scs {
		r.errs[sc] = err
	}
}

// kernelReport is the three columns of the kernel section; nil columns were not measured.
type kernelReport struct {
	nbkube, jupyter, direct *kernelResults
}

// measureKernels runs the kernel scenarios against every server, then the floor. A server
// without a working kernel API gets errors in its column; nothing here aborts the bench.
func measureKernels(servers []*server, python, work string) *kernelReport {
	rep := &kernelReport{}
	for _, s := range servers {
		waitQuiet(servers)
		r := measureServerKernels(s)
		switch s.name {
		case "nbkube":
			rep.nbkube = r
		case "jupyter":
			rep.jupyter = r
		}
	}
	if python != "" {
		waitQuiet(servers)
		rep.direct = measureFloor(python, filepath.Join(work, "floor"))
	}
	measureStarts(rep, servers, python, filepath.Join(work, "floor"))
	measureConcurrentRounds(rep, servers, python, filepath.Join(work, "floor"))
	return rep
}

// serverColumn is a server's column of the kernel report and a client to measure it with.
type serverColumn struct {
	r *kernelResults
	c *kernelClient
}

// serverColumns are the columns of the servers measured; close the clients' idle connections
// when done.
func serverColumns(rep *kernelReport, servers []*server) []serverColumn {
	var cols []serverColumn
	for _, s := range servers {
		r := rep.nbkube
		if s.name == "jupyter" {
			r = rep.jupyter
		}
		if r != nil {
			cols = append(cols, serverColumn{r, &kernelClient{s: s, hc: &http.Client{Timeout: kernelTimeout}}})
		}
	}
	return cols
}

// measureStarts runs scenarios 1 and 5: kernelStarts starts, each followed by its DELETE, on
// every column in turn, each turn led by the next column. A start takes under a second and a
// machine's speed drifts between minutes: columns measured one after the other, minutes
// apart, would compare the drift as much as the servers. A column's first error ends its
// starts.
func measureStarts(rep *kernelReport, servers []*server, python, dir string) {
	type column struct {
		r   *kernelResults
		run func() (start, del time.Duration, err error)
	}
	var cols []column
	for _, sc := range serverColumns(rep, servers) {
		defer sc.c.hc.CloseIdleConnections()
		cols = append(cols, column{sc.r, sc.c.startAndDelete})
	}
	if rep.direct != nil {
		f, err := startFloorStarter(python, dir)
		if err != nil {
			rep.direct.fail(err, scStart, scDelete)
		} else {
			defer f.close()
			cols = append(cols, column{rep.direct, f.startAndDelete})
		}
	}
	failed := map[*kernelResults]bool{}
	for i := range kernelStarts {
		for j := range cols {
			col := cols[(i+j)%len(cols)]
			if failed[col.r] {
				continue
			}
			waitQuiet(servers)
			start, del, err := col.run()
			if err != nil {
				failed[col.r] = true
				col.r.fail(err, scStart, scDelete)
				continue
			}
			col.r.start, col.r.del = append(col.r.start, start), append(col.r.del, del)
		}
	}
	for _, col := range cols {
		if failed[col.r] {
			continue
		}
		slices.Sort(col.r.start)
		slices.Sort(col.r.del)
		fmt.Fprintf(os.Stderr, "%-8s kernel start p50 %.0f ms max %.0f ms; DELETE p50 %.0f ms max %.0f ms\n", col.r.column,
			ms(p50(col.r.start)), ms(col.r.start[len(col.r.start)-1]), ms(p50(col.r.del)), ms(col.r.del[len(col.r.del)-1]))
	}
}

// concurrentRounds is how often scenario 4 runs per column. Twenty starts keep both cores busy
// for 12-17 s, and this machine's speed drifts by as much from one minute to the next: one
// start of each, minutes apart, compared the drift more than the servers. So the columns take
// turns, each round led by the next column, and the report gives the median with the range.
const concurrentRounds = 3

// measureConcurrentRounds runs scenario 4 (and, in a server's first round that works, scenario
// 6) in interleaved rounds over the columns.
func measureConcurrentRounds(rep *kernelReport, servers []*server, python, dir string) {
	type column struct {
		r   *kernelResults
		run func() (time.Duration, error)
	}
	var cols []column
	for _, sc := range serverColumns(rep, servers) {
		defer sc.c.hc.CloseIdleConnections()
		sc.r.errs[scRSS] = errors.New("no round of twenty kernels started any")
		cols = append(cols, column{sc.r, func() (time.Duration, error) { return sc.c.measureConcurrent(sc.r) }})
	}
	if rep.direct != nil {
		cols = append(cols, column{rep.direct, func() (time.Duration, error) { return floorConcurrent(python, dir) }})
	}
	failed := map[*kernelResults][]error{}
	for round := range concurrentRounds {
		for i := range cols {
			col := cols[(round+i)%len(cols)]
			waitQuiet(servers)
			d, err := col.run()
			if err != nil {
				fmt.Fprintf(os.Stderr, "%-8s %d kernels at once, round %d: %v\n", col.r.column, concurrentKernels, round+1, err)
				failed[col.r] = append(failed[col.r], err)
				continue
			}
			fmt.Fprintf(os.Stderr, "%-8s %d kernels at once, round %d: %.1f s\n", col.r.column, concurrentKernels, round+1, d.Seconds())
			col.r.concurrent = append(col.r.concurrent, d)
		}
	}
	for _, col := range cols {
		slices.Sort(col.r.concurrent)
		// A column is compared on the rounds that worked; one with none shows the first error.
		if len(col.r.concurrent) == 0 {
			col.r.fail(fmt.Errorf("all %d rounds failed, the first: %w", concurrentRounds, failed[col.r][0]), scConcurrent)
		}
	}
}

func measureServerKernels(s *server) *kernelResults {
	began := time.Now()
	r := newKernelResults(s.name)
	c := &kernelClient{s: s, hc: &http.Client{Timeout: kernelTimeout}}
	defer c.hc.CloseIdleConnections()
	log := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%-8s "+format+"\n", append([]any{s.name}, args...)...)
	}

	k, err := c.start()
	r.fail(err, scRoundTrip, scStream, scCPU)
	if err == nil {
		r.roundTrip, err = k.roundTrips(roundTripWarmup, roundTrips)
		r.fail(err, scRoundTrip)
		if err == nil {
			log("1+1 round trip p50 %.2f ms p99 %.2f ms", ms(p50(r.roundTrip)), ms(p99(r.roundTrip)))
		}
		c.measureStream(k, r)
		if r.errs[scStream] == nil {
			log("stream %d messages, %d lines in %.1f s", r.stream.messages, r.stream.lines, r.stream.elapsed.Seconds())
		}
		if err := c.stop(k); err != nil {
			log("deleting kernel %s: %v", k.id, err)
		}
	}

	log("kernel scenarios took %.0f s", time.Since(began).Seconds())
	return r
}

// measureStream runs scenario 3 and, around it, scenario 7: the CPU time the server side spent
// on it per message the client received.
func (c *kernelClient) measureStream(k *kernelConn, r *kernelResults) {
	// The agents are found before the stream and read again after it: an agent of a kernel
	// deleted earlier may still be exiting meanwhile, and counts for neither.
	var agents []int
	var agentsErr error
	if c.s.name == "nbkube" {
		agents, agentsErr = agentPIDs(c.s.pid)
	}
	server0, serverErr := cpuTimes([]int{c.s.pid})
	agents0, _ := cpuTimes(agents)
	received0 := k.received
	var err error
	r.stream, err = k.stream(fmt.Sprintf("for i in range(%d): print(i, flush=True)", streamLines))
	r.fail(err, scStream, scCPU)
	if err != nil {
		return
	}
	server1, err := cpuTimes([]int{c.s.pid})
	agents1, _ := cpuTimes(agents)
	if err := errors.Join(agentsErr, serverErr, err); err != nil {
		r.fail(err, scCPU)
		return
	}
	n := k.received - received0 + 1
	server, agent := cpuSpent(server0, server1)/time.Duration(n), cpuSpent(agents0, agents1)/time.Duration(n)
	r.cpu = cpuResult{perMessage: server + agent, relayed: n, how: fmt.Sprintf("%d messages", n)}
	if c.s.name == "nbkube" {
		r.cpu.how = fmt.Sprintf("API server process %.3f + agent %.3f; %d messages", ms(server), ms(agent), n)
	}
}

// measureConcurrent runs scenario 4 once and returns how long it took. Until scenario 6 has a
// measurement, it measures that too, with the twenty kernels running.
func (c *kernelClient) measureConcurrent(r *kernelResults) (time.Duration, error) {
	before, beforeErr := c.serverRSS()
	conns := make([]*kernelConn, concurrentKernels)
	errs := make([]error, concurrentKernels)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range conns {
		wg.Go(func() { conns[i], errs[i] = c.start() })
	}
	wg.Wait()
	elapsed := time.Since(t0)
	startErr := firstOf(errs)
	// Memory per kernel means as much with the kernels that did start.
	started := 0
	for _, k := range conns {
		if k != nil {
			started++
		}
	}
	if started > 0 && r.rss.perKernel == 0 {
		var err error
		r.rss, err = c.rssPerKernel(before, beforeErr, started)
		r.fail(err, scRSS)
		if err == nil {
			delete(r.errs, scRSS)
			fmt.Fprintf(os.Stderr, "%-8s server side %.1f MiB per kernel (%s)\n", c.s.name, r.rss.perKernel/(1<<20), r.rss.how)
		}
	}
	for _, k := range conns {
		if k != nil {
			wg.Go(func() { _ = c.stop(k) })
		}
	}
	wg.Wait()
	return elapsed, startErr
}

// firstOf summarises the errors of several attempts as the first one and how many failed.
func firstOf(errs []error) error {
	var first error
	failed := 0
	for _, err := range errs {
		if err != nil {
			first = cmp.Or(first, err)
			failed++
		}
	}
	if first == nil {
		return nil
	}
	return fmt.Errorf("%d of %d failed, the first: %w", failed, len(errs), first)
}

// kernelClient drives one server's kernels the way a Jupyter frontend does.
type kernelClient struct {
	s  *server
	hc *http.Client
}

func (c *kernelClient) do(method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(method, c.s.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "token "+c.s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.hc.Do(req)
}

// create is POST /api/kernels; it returns the new kernel's id.
func (c *kernelClient) create() (string, error) {
	resp, err := c.do(http.MethodPost, "api/kernels", strings.NewReader(`{"name":"python3"}`))
	if err != nil {
		return "", fmt.Errorf("POST /api/kernels: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("POST /api/kernels: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /api/kernels: status %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	var model struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &model); err != nil {
		return "", fmt.Errorf("POST /api/kernels: %w", err)
	}
	if model.ID == "" {
		return "", fmt.Errorf("POST /api/kernels: no kernel id in %.200q", body)
	}
	return model.ID, nil
}

// remove is DELETE /api/kernels/<id>.
func (c *kernelClient) remove(id string) error {
	resp, err := c.do(http.MethodDelete, "api/kernels/"+id, nil)
	if err != nil {
		return fmt.Errorf("DELETE /api/kernels/%s: %w", id, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("DELETE /api/kernels/%s: status %d: %s", id, resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}

// start is a kernel start as a frontend sees it: POST /api/kernels, open the channels
// WebSocket, and a kernel_info_request answered on shell.
func (c *kernelClient) start() (*kernelConn, error) {
	id, err := c.create()
	if err != nil {
		return nil, err
	}
	k, err := c.dial(id)
	if err == nil {
		err = k.kernelInfo()
		if err != nil {
			k.close()
		}
	}
	if err != nil {
		return nil, errors.Join(err, c.remove(id))
	}
	return k, nil
}

// stop closes the WebSocket, then deletes the kernel.
func (c *kernelClient) stop(k *kernelConn) error {
	k.close()
	return c.remove(k.id)
}

// startsAndDeletes runs scenarios 1 and 5 on the same kernels: n starts, each followed by a
// timed DELETE.
// startAndDelete times one start (scenario 1) and the DELETE that follows it (scenario 5).
func (c *kernelClient) startAndDelete() (start, del time.Duration, err error) {
	t0 := time.Now()
	k, err := c.start()
	if err != nil {
		return 0, 0, err
	}
	start = time.Since(t0)
	k.close()
	t0 = time.Now()
	if err := c.remove(k.id); err != nil {
		return 0, 0, err
	}
	return start, time.Since(t0), nil
}

// kernelConn is one client connection to a kernel's channels WebSocket.
type kernelConn struct {
	id, session string
	ws          *websocket.Conn
	received    int // frames read, all channels
}

func (c *kernelClient) dial(id string) (*kernelConn, error) {
	u, err := url.Parse(c.s.base)
	if err != nil {
		return nil, err
	}
	u.Scheme = "ws"
	session := newID()
	u.Path += "api/kernels/" + id + "/channels"
	u.RawQuery = url.Values{"session_id": {session}}.Encode()
	d := websocket.Dialer{HandshakeTimeout: kernelTimeout}
	// Go sets TCP_NODELAY on every TCP connection, so each message below leaves in one
	// segment as soon as it is written; the server's side is what is measured.
	ws, resp, err := d.Dial(u.String(), http.Header{"Authorization": {"token " + c.s.token}})
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("%w (status %d)", err, resp.StatusCode)
		}
		return nil, fmt.Errorf("opening the channels of kernel %s: %w", id, err)
	}
	// Bounded: the largest message here is a batch of printed lines.
	ws.SetReadLimit(16 << 20)
	return &kernelConn{id: id, session: session, ws: ws}, nil
}

func (k *kernelConn) close() {
	_ = k.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
		time.Now().Add(time.Second))
	_ = k.ws.Close()
}

// message is the part of a Jupyter message the bench reads.
type message struct {
	Channel string `json:"channel"`
	Header  struct {
		MsgType string `json:"msg_type"`
	} `json:"header"`
	ParentHeader struct {
		MsgID string `json:"msg_id"`
	} `json:"parent_header"`
	Content json.RawMessage `json:"content"`
}

// send writes one message in Jupyter's JSON WebSocket protocol and returns its msg_id. The
// message goes out in one write: a frame split over several writes would wait for an ACK
// with Nagle's algorithm on, the cost the issue found in Jupyter Server.
func (k *kernelConn) send(channel, msgType string, content any) (string, error) {
	id := newID()
	data, err := json.Marshal(map[string]any{
		"header": map[string]string{
			"msg_id": id, "msg_type": msgType, "session": k.session, "username": "bench",
			"date": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), "version": "5.3",
		},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "content": content,
		"channel": channel, "buffers": []any{},
	})
	if err != nil {
		return "", err
	}
	if err := k.ws.SetWriteDeadline(time.Now().Add(kernelTimeout)); err != nil {
		return "", err
	}
	return id, k.ws.WriteMessage(websocket.TextMessage, data)
}

// next reads the next JSON message, skipping binary frames (messages with buffers, which
// no request here produces).
func (k *kernelConn) next(deadline time.Time) (*message, error) {
	if err := k.ws.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	for {
		typ, data, err := k.ws.ReadMessage()
		if err != nil {
			return nil, fmt.Errorf("reading from kernel %s: %w", k.id, err)
		}
		k.received++
		if typ != websocket.TextMessage {
			continue
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("kernel %s sent %.100q: %w", k.id, data, err)
		}
		return &m, nil
	}
}

// kernelInfo asks for kernel_info on shell and waits for the reply.
func (k *kernelConn) kernelInfo() error {
	id, err := k.send("shell", "kernel_info_request", map[string]any{})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(kernelTimeout)
	for {
		m, err := k.next(deadline)
		if err != nil {
			return err
		}
		if m.ParentHeader.MsgID == id && m.Header.MsgType == "kernel_info_reply" {
			return nil
		}
	}
}

// execute runs code and returns once both its execute_reply and the idle status of the
// request arrived, the end of a cell as a frontend sees it. onIOPub sees the request's iopub
// messages.
func (k *kernelConn) execute(code string, onIOPub func(*message) error) error {
	id, err := k.send("shell", "execute_request", map[string]any{
		"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{},
		"allow_stdin": false, "stop_on_error": true,
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(kernelTimeout)
	replied, idle := false, false
	for !replied || !idle {
		m, err := k.next(deadline)
		if err != nil {
			return err
		}
		if m.ParentHeader.MsgID != id {
			continue
		}
		switch m.Channel {
		case "shell":
			replied = replied || m.Header.MsgType == "execute_reply"
		case "iopub":
			if onIOPub != nil {
				if err := onIOPub(m); err != nil {
					return err
				}
			}
			if m.Header.MsgType == "status" {
				var st struct {
					State string `json:"execution_state"`
				}
				if err := json.Unmarshal(m.Content, &st); err != nil {
					return fmt.Errorf("status message of kernel %s: %w", k.id, err)
				}
				idle = st.State == "idle"
			}
		}
	}
	return nil
}

// roundTrips is scenario 2: `1+1` executed n times after warm-up ones.
func (k *kernelConn) roundTrips(warmup, n int) ([]time.Duration, error) {
	for range warmup {
		if err := k.execute("1+1", nil); err != nil {
			return nil, err
		}
	}
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := k.execute("1+1", nil); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat, nil
}

// stream is scenario 3: ipykernel sends a flushed print as its own message unless prints
// pile up faster than its IO thread sends them, so lines are counted too.
func (k *kernelConn) stream(code string) (streamResult, error) {
	var r streamResult
	t0 := time.Now()
	err := k.execute(code, func(m *message) error {
		if m.Header.MsgType != "stream" {
			return nil
		}
		var out struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &out); err != nil {
			return fmt.Errorf("stream message of kernel %s: %w", k.id, err)
		}
		r.messages++
		r.lines += strings.Count(out.Text, "\n")
		return nil
	})
	r.elapsed = time.Since(t0)
	return r, err
}

// newID is a random UUID-shaped id, as Jupyter clients make msg_ids and session ids.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// serverRSS is the resident memory of Jupyter Server's process, which holds every kernel's
// connections; nbkube's memory per kernel is its agents', measured directly.
func (c *kernelClient) serverRSS() (int64, error) {
	if c.s.name == "nbkube" {
		return 0, nil
	}
	return rss(c.s.pid)
}

// rssPerKernel is scenario 6 with n kernels running: the mean RSS of nbkube's agents, or
// Jupyter Server's growth over before, when it had no kernel, divided by n.
func (c *kernelClient) rssPerKernel(before int64, beforeErr error, n int) (rssResult, error) {
	if c.s.name != "nbkube" {
		if beforeErr != nil {
			return rssResult{}, beforeErr
		}
		after, err := rss(c.s.pid)
		if err != nil {
			return rssResult{}, err
		}
		return rssResult{
			perKernel: float64(after-before) / float64(n),
			how:       fmt.Sprintf("process %.0f → %.0f MiB with %d kernels", float64(before)/(1<<20), float64(after)/(1<<20), n),
		}, nil
	}
	agents, err := agentPIDs(c.s.pid)
	if err != nil {
		return rssResult{}, err
	}
	var sum, largest, pss int64
	for _, pid := range agents {
		r, err := rss(pid)
		if err != nil {
			return rssResult{}, err
		}
		p, err := proportionalSet(pid)
		if err != nil {
			return rssResult{}, err
		}
		sum += r
		pss += p
		largest = max(largest, r)
	}
	found := float64(len(agents))
	return rssResult{
		perKernel: float64(sum) / found,
		how: fmt.Sprintf("mean of %d agents, largest %.1f MiB; PSS %.1f MiB", len(agents),
			float64(largest)/(1<<20), float64(pss)/found/(1<<20)),
	}, nil
}

// agentPIDs finds the agent processes (`nbkube-agent -- <kernel argv>`) below root, the process of
// `nbkube local`, which runs the containers of kernel pods as its own children.
func agentPIDs(root int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	var agents []int
	queue := slices.Clone(children[root])
	for len(queue) > 0 {
		pid := queue[0]
		queue = append(queue[1:], children[pid]...)
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		// `nbkube agent -- <argv>` or `.../nbkube-agent -- <argv>`: "agent" before the "--",
		// which keeps the kernel's own arguments out of the match.
		own, _, found := strings.Cut(string(cmdline), "\x00--\x00")
		if found && strings.Contains(own, "agent") {
			agents = append(agents, pid)
		}
	}
	if len(agents) == 0 {
		return nil, fmt.Errorf("no nbkube-agent process below process %d", root)
	}
	return agents, nil
}

// waitQuiet waits (at most a minute) until every server's process is idle: after the
// contents load, Jupyter Server goes on working through queued requests for seconds, and
// kernel starts measured meanwhile (for either server) would pay for it.
func waitQuiet(servers []*server) {
	var pids []int
	for _, s := range servers {
		pids = append(pids, s.pid)
	}
	start := time.Now()
	for time.Since(start) < time.Minute {
		before, err := cpuTimes(pids)
		if err != nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
		after, err := cpuTimes(pids)
		if err != nil {
			return
		}
		// Under 5 % of a core over the half second: 2 ticks of 10 ms.
		if cpuSpent(before, after) <= 20*time.Millisecond {
			break
		}
	}
	if waited := time.Since(start); waited > time.Second {
		fmt.Fprintf(os.Stderr, "bench: waited %.1f s for the servers to go idle\n", waited.Seconds())
	}
}

// procStat returns the fields of /proc/<pid>/stat from the third (state) on; the second, the
// command name in parentheses, may hold spaces.
func procStat(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// cpuTimes reads the user and system CPU time of the processes, all their threads included.
// Processes that exited are left out.
func cpuTimes(pids []int) (map[int]time.Duration, error) {
	times := map[int]time.Duration{}
	for _, pid := range pids {
		f, err := procStat(pid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// utime and stime are the 14th and 15th fields of the line.
		var ticks int64
		for _, s := range f[11:13] {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/%d/stat: %w", pid, err)
			}
			ticks += n
		}
		times[pid] = time.Duration(ticks) * time.Second / clockTicks
	}
	if len(times) == 0 && len(pids) > 0 {
		return nil, fmt.Errorf("processes %v exited", pids)
	}
	return times, nil
}

// cpuSpent is the CPU time the processes read both times spent in between.
func cpuSpent(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		if t0, ok := before[pid]; ok {
			d += t - t0
		}
	}
	return d
}

// rss is the resident set size of a process.
func rss(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/statm: %q", pid, data)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/statm: %w", pid, err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// proportionalSet is a process's PSS: its RSS with each page shared with other processes
// counted as a share. nbkube local runs every agent from the same binary, whose pages the agents
// share; in a cluster each kernel pod copies the binary into its own volume and shares nothing.
func proportionalSet(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "Pss:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/smaps_rollup: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/smaps_rollup: no Pss", pid)
}

// measureFloor runs floor.py, which measures scenarios 1 to 5 with no server: jupyter_client
// in the same process as the measuring code, ZMQ straight to ipykernel.
func measureFloor(python, dir string) *kernelResults {
	began := time.Now()
	r := newKernelResults("direct")
	all := []kernelScenario{scRoundTrip, scStream}
	out, err := runFloor(python, dir, "--round-trips", strconv.Itoa(roundTrips), "--warmup", strconv.Itoa(roundTripWarmup),
		"--lines", strconv.Itoa(streamLines))
	if err != nil {
		r.fail(err, all...)
		return r
	}
	seconds := func(v []float64) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, s := range v {
			d[i] = time.Duration(s * float64(time.Second))
		}
		slices.Sort(d)
		return d
	}
	r.roundTrip = seconds(out.RoundTrip)
	if len(r.roundTrip) == 0 {
		r.fail(errors.New("floor.py returned no samples"), all...)
		return r
	}
	r.stream = streamResult{messages: out.Stream.Messages, lines: out.Stream.Lines, elapsed: seconds([]float64{out.Stream.Seconds})[0]}
	fmt.Fprintf(os.Stderr, "direct   1+1 p50 %.2f ms p99 %.2f ms; stream %d messages in %.1f s\n",
		ms(p50(r.roundTrip)), ms(p99(r.roundTrip)), r.stream.messages, r.stream.elapsed.Seconds())
	fmt.Fprintf(os.Stderr, "direct   kernel scenarios took %.0f s\n", time.Since(began).Seconds())
	return r
}

// floorOutput is the JSON floor.py prints; times in seconds.
type floorOutput struct {
	RoundTrip []float64 `json:"round_trip"`
	Stream    struct {
		Messages int     `json:"messages"`
		Lines    int     `json:"lines"`
		Seconds  float64 `json:"seconds"`
	} `json:"stream"`
	Concurrent float64 `json:"concurrent"`
}

// floorStarter is floor.py --serve-starts: one timed start and shutdown per request.
type floorStarter struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *tail
}

func startFloorStarter(python, dir string) (*floorStarter, error) {
	cmd, err := floorCommand(context.Background(), python, dir, "--serve-starts")
	if err != nil {
		return nil, err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	f := &floorStarter{cmd: cmd, in: in, out: bufio.NewScanner(out), stderr: &tail{max: 2 << 10}}
	cmd.Stderr = f.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("floor.py: %w", err)
	}
	return f, nil
}

func (f *floorStarter) startAndDelete() (start, del time.Duration, err error) {
	if _, err := io.WriteString(f.in, "start\n"); err != nil {
		return 0, 0, fmt.Errorf("floor.py: %w: %s", err, lastLine(f.stderr.b))
	}
	if !f.out.Scan() {
		return 0, 0, fmt.Errorf("floor.py ended (%w): %s", cmp.Or(f.out.Err(), io.EOF), lastLine(f.stderr.b))
	}
	var r struct {
		Start, Delete float64
		Error         string
	}
	if err := json.Unmarshal(f.out.Bytes(), &r); err != nil {
		return 0, 0, fmt.Errorf("floor.py output: %w", err)
	}
	if r.Error != "" {
		return 0, 0, fmt.Errorf("floor.py: %s", r.Error)
	}
	return time.Duration(r.Start * float64(time.Second)), time.Duration(r.Delete * float64(time.Second)), nil
}

// close ends floor.py: it returns at the end of its input.
func (f *floorStarter) close() {
	_ = f.in.Close()
	done := make(chan struct{})
	go func() {
		_ = f.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = f.cmd.Process.Kill()
		<-done
	}
}

// floorConcurrent runs floor.py for scenario 4 alone.
func floorConcurrent(python, dir string) (time.Duration, error) {
	out, err := runFloor(python, dir, "--only-concurrent", strconv.Itoa(concurrentKernels))
	if err != nil {
		return 0, err
	}
	return time.Duration(out.Concurrent * float64(time.Second)), nil
}

// floorCommand is floor.py with args, run by python in dir.
func floorCommand(ctx context.Context, python, dir string, args ...string) (*exec.Cmd, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "floor.py")
	if err := os.WriteFile(script, floorScript, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, python, append([]string{script}, args...)...)
	cmd.Dir = dir
	// Connection files go to the bench's directory, not the user's runtime directory.
	cmd.Env = append(os.Environ(), "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"))
	return cmd, nil
}

func runFloor(python, dir string, args ...string) (*floorOutput, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd, err := floorCommand(ctx, python, dir, args...)
	if err != nil {
		return nil, err
	}
	stdout, stderr := &tail{max: 1 << 20}, &tail{max: 2 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("floor.py: %w: %s", err, lastLine(stderr.b))
	}
	var out floorOutput
	if err := json.Unmarshal([]byte(lastLine(stdout.b)), &out); err != nil {
		return nil, fmt.Errorf("floor.py output: %w", err)
	}
	return &out, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func p50(sorted []time.Duration) time.Duration { return sorted[len(sorted)/2] }
func p99(sorted []time.Duration) time.Duration { return sorted[len(sorted)*99/100] }

// kernelRow is one row of the kernel section: how a column shows its measurement, and whether
// nbkube meets the row's target.
type kernelRow struct {
	sc            kernelScenario
	title, target string
	cell          func(r, direct *kernelResults) string
	meets         func(nb, direct *kernelResults) bool
}

func kernelRows() []kernelRow {
	// ratio is "(1.05× direct)" when there is a direct measurement to compare with.
	ratio := func(direct *kernelResults, sc kernelScenario, v func(*kernelResults) time.Duration, r *kernelResults) string {
		if direct == nil || direct.errs[sc] != nil || r == direct {
			return ""
		}
		return fmt.Sprintf(" (%.2f× direct)", float64(v(r))/float64(v(direct)))
	}
	within := func(sc kernelScenario, v func(*kernelResults) time.Duration, limit float64) func(nb, direct *kernelResults) bool {
		return func(nb, direct *kernelResults) bool {
			return direct != nil && direct.errs[sc] == nil && float64(v(nb)) <= limit*float64(v(direct))
		}
	}
	startP50 := func(r *kernelResults) time.Duration { return p50(r.start) }
	rttP50 := func(r *kernelResults) time.Duration { return p50(r.roundTrip) }
	concurrent := func(r *kernelResults) time.Duration { return p50(r.concurrent) }
	return []kernelRow{
		{
			sc: scStart, title: fmt.Sprintf("kernel start: POST, WebSocket, kernel_info reply (p50 / max ms, %d starts)", kernelStarts), target: "p50 ≤ 1.1× direct",
			cell: func(r, d *kernelResults) string {
				return fmt.Sprintf("%.0f / %.0f%s", ms(p50(r.start)), ms(r.start[len(r.start)-1]), ratio(d, scStart, startP50, r))
			},
			meets: within(scStart, startP50, 1.1),
		},
		{
			sc: scRoundTrip, title: fmt.Sprintf("execute `1+1`: reply and idle (p50 / p99 ms, %d after %d)", roundTrips, roundTripWarmup), target: "p50 ≤ 1.3× direct",
			cell: func(r, d *kernelResults) string {
				return fmt.Sprintf("%.2f / %.2f%s", ms(p50(r.roundTrip)), ms(p99(r.roundTrip)), ratio(d, scRoundTrip, rttP50, r))
			},
			meets: within(scRoundTrip, rttP50, 1.3),
		},
		{
			sc: scStream, title: fmt.Sprintf("output stream: %d flushed prints (stream messages/s; messages, lines received, s)", streamLines), target: "–",
			cell: func(r, _ *kernelResults) string {
				s := r.stream
				return fmt.Sprintf("%.0f/s (%d msgs, %d lines, %.1f s)", float64(s.messages)/s.elapsed.Seconds(), s.messages, s.lines, s.elapsed.Seconds())
			},
		},
		{
			sc: scConcurrent, title: fmt.Sprintf("%d kernels started at once, until all answered kernel_info (median, range of %d interleaved rounds, s)", concurrentKernels, concurrentRounds), target: "median ≤ 1.1× direct",
			cell: func(r, d *kernelResults) string {
				rounds := ""
				if n := len(r.concurrent); n < concurrentRounds {
					rounds = fmt.Sprintf(", %d of %d rounds worked", n, concurrentRounds)
				}
				return fmt.Sprintf("%.1f, range %.1f–%.1f%s%s", p50(r.concurrent).Seconds(), r.concurrent[0].Seconds(),
					r.concurrent[len(r.concurrent)-1].Seconds(), rounds, ratio(d, scConcurrent, concurrent, r))
			},
			meets: within(scConcurrent, concurrent, 1.1),
		},
		{
			sc: scDelete, title: fmt.Sprintf("`DELETE /api/kernels/<id>` → 204 (p50 / max ms, %d kernels)", kernelStarts), target: "p50 < 180 ms",
			cell: func(r, _ *kernelResults) string {
				return fmt.Sprintf("%.0f / %.0f", ms(p50(r.del)), ms(r.del[len(r.del)-1]))
			},
			meets: func(nb, _ *kernelResults) bool { return p50(nb.del) < 180*time.Millisecond },
		},
		{
			sc: scRSS, title: fmt.Sprintf("server-side RSS per kernel, kernel processes excluded (MiB, %d kernels)", concurrentKernels), target: "< 20 MiB",
			cell: func(r, _ *kernelResults) string {
				return fmt.Sprintf("%.1f (%s)", r.rss.perKernel/(1<<20), r.rss.how)
			},
			meets: func(nb, _ *kernelResults) bool { return nb.rss.perKernel < 20<<20 },
		},
		{
			sc: scCPU, title: "proxy CPU per relayed message during the stream (ms)", target: "< 0.1 ms",
			cell: func(r, _ *kernelResults) string {
				return fmt.Sprintf("%.3f (%s)", ms(r.cpu.perMessage), r.cpu.how)
			},
			meets: func(nb, _ *kernelResults) bool { return nb.cpu.perMessage < 100*time.Microsecond },
		},
	}
}

// writeKernels appends the kernel section to the report.
func writeKernels(b *strings.Builder, rep *kernelReport) {
	b.WriteString("\n## Kernels\n\n" +
		"The standard Jupyter API on both servers (POST and DELETE /api/kernels, Jupyter's JSON protocol on the " +
		"channels WebSocket), from a Go client in this process. \"direct\" is the floor, no server at all: " +
		"test/bench/floor.py drives ipykernel over ZMQ with jupyter_client. The same ipykernel (Debian's " +
		"/usr/bin/python3) runs under all three.\n\n")
	b.WriteString("| scenario | nbkube | Jupyter Server | direct | target (nbkube) | nbkube meets it |\n|---|---|---|---|---|---|\n")
	for _, row := range kernelRows() {
		cell := func(r *kernelResults) string {
			switch {
			case r == nil:
				return "not measured"
			case row.sc == scRSS || row.sc == scCPU:
				if r == rep.direct {
					return "– (no server)"
				}
			}
			if err := r.errs[row.sc]; err != nil {
				return "n/a (error: " + markdownCell(err.Error(), 120) + ")"
			}
			return row.cell(r, rep.direct)
		}
		meets := "–"
		if rep.nbkube != nil && rep.nbkube.errs[row.sc] == nil && row.meets != nil {
			meets = "no"
			if row.meets(rep.nbkube, rep.direct) {
				meets = "yes"
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", markdownCell(row.title, 200),
			cell(rep.nbkube), cell(rep.jupyter), cell(rep.direct), row.target, meets)
	}
	b.WriteString(kernelNotes)
}

// markdownCell makes s fit in one table cell of at most n characters.
func markdownCell(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

// kernelNotes explain the kernel section; they describe the method, not a particular run.
const kernelNotes = `
### Reading the kernel numbers

* Times run from the first byte the client sends to the last message it waits for. A start is
  POST /api/kernels, the channels WebSocket opened, a kernel_info_request on shell and its reply; the
  direct start is ` + "`KernelManager.start_kernel()`" + ` and ` + "`BlockingKernelClient.kernel_info(reply=True)`" + `.
  Each start is followed by the timed DELETE (direct: ` + "`shutdown_kernel(now=False)`" + `, which Jupyter
  Server's DELETE calls: a shutdown_request, then polling every 100 ms until the process exited).
  The columns take turns, start by start, each turn led by the next column, with the servers
  idle before each start: one column's starts in a row, minutes before another's, compared
  the machine's drift (the floor's p50 moved between 740 and 1254 ms from run to run).
* A round trip ends when both the execute_reply (shell) and the idle status of the request
  (iopub) arrived. For reference, the issue measured Jupyter Server's ` + "`1+1`" + ` at p50 48 ms (no
  TCP_NODELAY on its WebSocket) against 4.1–4.3 ms direct, and a start at 576 ms against
  456–470 ms direct, on a faster machine than this one.
* The stream counts the iopub stream messages of the request until its idle status, and the
  lines they carry (20000 when nothing was dropped): ipykernel sends a flushed print as its own
  message unless prints pile up faster than its IO thread sends them. Jupyter Server limits iopub
  to 1000 messages/s over 3 s by default and drops stream output above that, with a notice; nbkube's
  agent applies the same limits, so fewer than 20000 lines through a server is the limit at work.
* Twenty kernels at once runs in rounds after the other scenarios (the row's title says how
  many): each round starts twenty on every column in turn, each round led by the next column,
  and the cell gives the median and the range. Twenty starts keep both cores busy for 12–18 s,
  and this machine's speed drifts by as much between minutes, so a single start per column,
  minutes apart, compared the drift as much as the servers. The RSS per kernel is taken with the
  twenty kernels of a server's first round that started any. The floor's client is 20 Python
  threads with blocking clients, which cost it 2–3 s of CPU per twenty; Jupyter Server's single
  asyncio process costs less, so it can come in under the floor here.
* RSS per kernel is the server side only, kernel processes excluded: for nbkube the mean RSS of
  the ` + "`nbkube-agent`" + ` processes (found below ` + "`nbkube local`" + ` by their command line) with the 20 kernels
  running; for Jupyter Server the growth of its process from no kernel to 20, divided by 20.
* Proxy CPU is utime+stime (/proc/<pid>/stat, 10 ms ticks) over the stream, divided by the
  messages the client received plus the one it sent: for nbkube the ` + "`nbkube local`" + ` process (its API
  server; the controllers and local node idle beside it) plus the agents, for Jupyter Server its
  process. Output dropped by the rate limit was read from the kernel too but is not in the count,
  so when lines were dropped the figure overstates the cost per message.
* What twenty starts at once cost beside the kernels, measured on this machine: nbkube pays
  for the control plane, on the same two cores as the kernels. Per twenty kernels the kernels
  themselves spend 21–27 s of CPU under nbkube as under the floor; beside them kube-apiserver
  spends 1.4–1.9 s, the agents 1.1–1.5 s, the nbkube process 0.9–1.3 s, etcd 0.6–0.8 s and
  kube-controller-manager 0.3–0.4 s (about 0.5 s of that is the control plane's idle
  baseline over the run), where the floor's client spends 2.2–3.0 s. A kernel's start and
  deletion are about 17 API writes (the Kernel, its Secret and Pod, their status updates, a
  few events). Starts are CPU-bound, so the 2–3 s of extra CPU are 1–1.5 s of wall time, 7–10 %
  of a twenty-kernel start: of all the targets this one has the least margin. The floor itself
  moves by ±1.5 s between runs here.
* A single start pays 50–130 ms from the POST to the kernel's process (median about 80),
  measured on this machine from the logs: 20–25 ms until the pod exists (the Kernel, its
  Secret and its Pod are written one after the other, 4–6 ms each), 5–10 ms to bind it, 5–7 ms
  for the local node to start it, then 20–55 ms for the agent, most of it the start of a Go
  process while the control plane handles the new pod beside it on two cores, and 3–5 ms to
  write the connection file and fork the kernel. After the kernel answers, the POST's 201
  follows within 2 ms. That is about a tenth of this machine's fastest direct starts, so the
  single-start target has a thin margin too.
* The proxy's CPU per message is mostly system calls and Go runtime wake-ups: the agent reads
  a printing kernel in moderated batches (at most 8 ms late, with the socket's low-water mark
  raised meanwhile so that arriving lines do not wake it) and both the agent and the API
  server write what they have at hand in one write; see docs/agent.md.
* "n/a (error …)" marks a scenario a server could not run; the rest of the bench goes on.
`
