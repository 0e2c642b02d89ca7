package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// How the contents and export cells are measured: workers sending requests back to back, in
// turns per server.

// result is one cell: a scenario on one server at one concurrency.
type result struct {
	rps      float64
	p50, p99 time.Duration
	errors   int64
	mem      memory
}

// timing gathers the requests of one scenario on one server over one or more slices of time
// (measureContents interleaves the servers' slices).
type timing struct {
	lat      []time.Duration
	errs     int64
	measured time.Duration
	mem      memory
	firstErr error
}

// add measures one slice of d, after its warm-up, into t.
func (t *timing) add(s *server, sc scenario, concurrency int, d time.Duration) error {
	lat, errs, mem, err := measureSlice(s, sc, concurrency, d)
	if err != nil && len(lat) == 0 {
		return err
	}
	if err != nil && t.firstErr == nil {
		t.firstErr = err
	}
	if t.measured == 0 {
		t.mem = mem
	} else {
		t.mem.requests += mem.requests
		t.mem.elapsed += mem.elapsed
		t.mem.allocated += mem.allocated
		t.mem.allocatedKnown = t.mem.allocatedKnown && mem.allocatedKnown
		t.mem.rss = mem.rss
	}
	t.lat = append(t.lat, lat...)
	t.errs += errs
	t.measured += d
	return nil
}

func (t *timing) result() (result, error) {
	if len(t.lat) == 0 {
		if t.firstErr != nil {
			return result{}, t.firstErr
		}
		return result{}, errors.New("no request completed")
	}
	slices.Sort(t.lat)
	return result{
		rps:    float64(len(t.lat)) / t.measured.Seconds(),
		p50:    t.lat[len(t.lat)/2],
		p99:    t.lat[len(t.lat)*99/100],
		errors: t.errs,
		mem:    t.mem,
	}, nil
}

// measureSlice is one measurement of d after a warm-up of d/5: the latencies of the requests
// sent after the warm-up, the failures, and memory over it all. err is the first failure.
func measureSlice(s *server, sc scenario, concurrency int, d time.Duration) ([]time.Duration, int64, memory, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	warm := d / 5
	ctx, cancel := context.WithTimeout(context.Background(), warm+d)
	defer cancel()
	start := time.Now()
	measureFrom := start.Add(warm)
	var mu sync.Mutex
	var lat []time.Duration
	var errs, done atomic.Int64
	var firstErr atomic.Value
	allocBefore, allocKnown := allocatedBytes(s)
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; ctx.Err() == nil; i++ {
				req, err := sc.request(s, w, i)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				req.Header.Set("Authorization", "token "+s.token)
				t0 := time.Now()
				resp, err := hc.Do(req.WithContext(ctx))
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				done.Add(1)
				if resp.StatusCode >= 300 {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("status %d", resp.StatusCode))
					continue
				}
				if t0.After(measureFrom) && ctx.Err() == nil {
					mine = append(mine, time.Since(t0))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	mem := memory{requests: done.Load(), elapsed: time.Since(start)}
	mem.rss, _ = rss(s.pid)
	if allocAfter, ok := allocatedBytes(s); ok && allocKnown {
		mem.allocated, mem.allocatedKnown = allocAfter-allocBefore, true
	}
	err, _ := firstErr.Load().(error)
	return lat, errs.Load(), mem, err
}

// contentsSlices is how many turns each server takes in a contents cell of one client: this
// machine's speed drifts by tens of percent between minutes, so one server's five seconds,
// then the other's, compared the drift as much as the servers. With many clients a request
// can take longer than a turn (Jupyter's listings at 64 clients take over a second), so
// those cells stay one turn each.
const contentsSlices = 5

func measureContents(servers []*server, d time.Duration) (map[string]map[string]result, error) {
	results := map[string]map[string]result{}
	for _, sc := range contentsScenarios() {
		for _, c := range sc.concurrencies() {
			turns := contentsSlices
			if c > 1 {
				turns = 1
			}
			cell, err := measureCell(servers, sc, c, d, turns)
			if err != nil {
				return nil, err
			}
			results[fmt.Sprintf("%s@%d", sc.name, c)] = cell
		}
	}
	return results, nil
}

// measureCell measures sc at c clients on each server for d, in turns of d/turns, the servers
// taking turns (each turn led by the next), and prints each server's result.
func measureCell(servers []*server, sc scenario, c int, d time.Duration, turns int) (map[string]result, error) {
	timings := make([]timing, len(servers))
	for i := range turns {
		for j := range servers {
			k := (i + j) % len(servers)
			if err := timings[k].add(servers[k], sc, c, d/time.Duration(turns)); err != nil {
				return nil, fmt.Errorf("%s %s@%d: %w", servers[k].name, sc.name, c, err)
			}
		}
	}
	cell := map[string]result{}
	for k, s := range servers {
		r, err := timings[k].result()
		if err != nil {
			return nil, fmt.Errorf("%s %s@%d: %w", s.name, sc.name, c, err)
		}
		fmt.Fprintf(os.Stderr, "%-8s %-20s c=%-3d %8.1f req/s  p50 %7.2f ms  p99 %7.2f ms  errors %d\n",
			s.name, sc.name, c, r.rps, ms(r.p50), ms(r.p99), r.errors)
		cell[s.name] = r
	}
	return cell, nil
}
