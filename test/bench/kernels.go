package main

// The kernel scenarios speak the standard Jupyter Server API (POST/DELETE /api/kernels and the
// JSON protocol on /api/kernels/<id>/channels) to each server, and compare them with the floor:
// floor.py driving ipykernel over ZMQ with jupyter_client, no server in the way.

import (
	"cmp"
	_ "embed" // floor.py
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// The sizes of the kernel scenarios; together they take a minute or two per column.
const (
	// kernelStarts: a kernel's own start varies from one start to the next by more than the
	// start target's margin, so the p50 needs this many to be stable from run to run.
	kernelStarts      = 20
	roundTrips        = 500
	roundTripWarmup   = 20
	streamLines       = 20000
	concurrentKernels = 20
	// manyKernels are started at once once per column: none may fail.
	manyKernels = 100
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
	scMany
	scDelete
	scRSS
	scCPU
	scBurstCPU
)

// kernelResults is one column of the kernel report: what the scenarios measured on a server or
// on the floor. A scenario that could not run has its error in errs instead of a value.
type kernelResults struct {
	column                string
	start, del, roundTrip []time.Duration // sorted
	stream                streamResult
	concurrent            []time.Duration // sorted; one per round that worked
	many                  time.Duration   // manyKernels at once, until all answered
	rss                   rssResult
	cpu                   cpuResult
	burst                 []burstRound // one per round of concurrentKernels that worked
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

// concurrentOnly narrows the kernel section to scenario 4 (with 6, measured on the way): the
// scenario whose cost is spread over the whole control plane, compared A/B without the other
// scenarios' minutes of drift in between.
var concurrentOnly = flag.Bool("kernels-concurrent-only", false,
	"in the kernels section, measure only the twenty kernels started at once")

// startsOnly narrows the kernel section to scenarios 1 and 5 (starts and deletes), with and
// without sandboxes: the sandbox's start cost, compared without minutes of other scenarios.
var startsOnly = flag.Bool("kernels-starts-only", false,
	"in the kernels section, measure only kernel starts and deletes, with and without --sandbox")

// kernelReport is the three columns of the kernel section; nil columns were not measured.
// sandboxed is nbkube local with --sandbox, whose starts fill a row of nbkube's column.
type kernelReport struct {
	nbkube, jupyter, direct, sandboxed *kernelResults
}

// measureKernels runs the kernel scenarios against every server, then the floor. A server
// without a working kernel API gets errors in its column; nothing here aborts the bench.
func measureKernels(servers []*server, python, work, nbkubeBin string) *kernelReport {
	rep := &kernelReport{}
	if *concurrentOnly {
		skipped := errors.New("not measured (-kernels-concurrent-only)")
		for _, s := range servers {
			r := newKernelResults(s.name)
			r.fail(skipped, scStart, scRoundTrip, scStream, scDelete, scCPU, scMany)
			if s.name == "nbkube" {
				rep.nbkube = r
			} else {
				rep.jupyter = r
			}
		}
		if python != "" {
			rep.direct = newKernelResults("direct")
			rep.direct.fail(skipped, scStart, scRoundTrip, scStream, scDelete, scMany)
		}
		measureConcurrentRounds(rep, servers, python, filepath.Join(work, "floor"))
		return rep
	}
	for _, s := range servers {
		waitQuiet(servers)
		if *startsOnly {
			r := newKernelResults(s.name)
			r.fail(errors.New("not measured (-kernels-starts-only)"), scRoundTrip, scStream, scCPU, scMany)
			if s.name == "nbkube" {
				rep.nbkube = r
			} else {
				rep.jupyter = r
			}
			continue
		}
		r := measureServerKernels(s)
		switch s.name {
		case "nbkube":
			rep.nbkube = r
		case "jupyter":
			rep.jupyter = r
		}
	}
	if python != "" && !*startsOnly {
		waitQuiet(servers)
		rep.direct = measureFloor(python, filepath.Join(work, "floor"))
	}
	// The sandboxed nbkube runs for the starts only: its starts take turns with the others'.
	rep.sandboxed = newKernelResults("sandboxed")
	var sandboxed *server
	if s, err := startNbkube(nbkubeBin, filepath.Join(work, "sandboxed"), "--sandbox"); err != nil {
		rep.sandboxed.fail(err, scStart)
	} else {
		sandboxed = s
		s.name = "sandboxed"
	}
	measureStarts(rep, servers, sandboxed, python, filepath.Join(work, "floor"))
	if sandboxed != nil {
		sandboxed.stop()
	}
	if *startsOnly {
		return rep
	}
	measureConcurrentRounds(rep, servers, python, filepath.Join(work, "floor"))
	measureMany(rep, servers, python, filepath.Join(work, "floor"))
	return rep
}

// measureMany starts manyKernels at once, once in each column: the ones that fail are
// reported, not retried.
func measureMany(rep *kernelReport, servers []*server, python, dir string) {
	for _, sc := range serverColumns(rep, servers) {
		waitQuiet(servers)
		c := &kernelClient{s: sc.c.s, hc: &http.Client{Timeout: 5 * time.Minute}}
		conns, d, err := c.startAtOnce(manyKernels)
		c.stopAll(conns)
		c.hc.CloseIdleConnections()
		sc.c.hc.CloseIdleConnections()
		if err != nil {
			sc.r.fail(err, scMany)
			continue
		}
		sc.r.many = d
		fmt.Fprintf(os.Stderr, "%-8s %d kernels at once: %.1f s\n", sc.r.column, manyKernels, d.Seconds())
	}
	if rep.direct != nil {
		waitQuiet(servers)
		d, err := floorConcurrent(python, dir, manyKernels)
		if err != nil {
			rep.direct.fail(err, scMany)
			return
		}
		rep.direct.many = d
		fmt.Fprintf(os.Stderr, "direct   %d kernels at once: %.1f s\n", manyKernels, d.Seconds())
	}
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
func measureStarts(rep *kernelReport, servers []*server, sandboxed *server, python, dir string) {
	type column struct {
		r   *kernelResults
		run func() (start, del time.Duration, err error)
	}
	var cols []column
	for _, sc := range serverColumns(rep, servers) {
		defer sc.c.hc.CloseIdleConnections()
		cols = append(cols, column{sc.r, sc.c.startAndDelete})
	}
	if sandboxed != nil {
		c := &kernelClient{s: sandboxed, hc: &http.Client{Timeout: kernelTimeout}}
		defer c.hc.CloseIdleConnections()
		cols = append(cols, column{rep.sandboxed, c.startAndDelete})
		servers = append(slices.Clip(servers), sandboxed)
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
		sc.r.errs[scBurstCPU] = errors.New("no round of twenty kernels worked")
		cols = append(cols, column{sc.r, func() (time.Duration, error) { return sc.c.measureConcurrent(sc.r) }})
	}
	if rep.direct != nil {
		cols = append(cols, column{rep.direct, func() (time.Duration, error) { return floorConcurrent(python, dir, concurrentKernels) }})
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
	received0 := k.Frames()
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
	n := int(k.Frames() - received0 + 1)
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
	cpuBefore, cpuErr := treeCPU(c.s.pid)
	conns, elapsed, startErr := c.startAtOnce(concurrentKernels)
	if startErr == nil && cpuErr == nil {
		if after, err := treeCPU(c.s.pid); err == nil {
			r.burst = append(r.burst, burstRound{elapsed: elapsed, cpu: spentByName(cpuBefore, after)})
			delete(r.errs, scBurstCPU)
		}
	}
	// Memory per kernel means as much with the kernels that did start.
	started := len(conns)
	if started > 0 && r.rss.perKernel == 0 {
		var err error
		r.rss, err = c.rssPerKernel(before, beforeErr, started)
		r.fail(err, scRSS)
		if err == nil {
			delete(r.errs, scRSS)
			fmt.Fprintf(os.Stderr, "%-8s server side %.1f MiB per kernel (%s)\n", c.s.name, r.rss.perKernel/(1<<20), r.rss.how)
		}
	}
	c.stopAll(conns)
	return elapsed, startErr
}

// startAtOnce starts n kernels at once, each until it answered kernel_info, and returns those
// that started, the time until the last did, and the errors of those that did not.
func (c *kernelClient) startAtOnce(n int) ([]*kernelConn, time.Duration, error) {
	conns := make([]*kernelConn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range conns {
		wg.Go(func() { conns[i], errs[i] = c.start() })
	}
	wg.Wait()
	elapsed := time.Since(t0)
	return slices.DeleteFunc(conns, func(k *kernelConn) bool { return k == nil }), elapsed, firstOf(errs)
}

// stopAll stops the kernels at once.
func (c *kernelClient) stopAll(conns []*kernelConn) {
	var wg sync.WaitGroup
	for _, k := range conns {
		wg.Go(func() { _ = c.stop(k) })
	}
	wg.Wait()
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

func p50(sorted []time.Duration) time.Duration { return sorted[len(sorted)/2] }
func p99(sorted []time.Duration) time.Duration { return sorted[len(sorted)*99/100] }
