package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// memory is what a server's process used during one contents measurement: its resident set
// at the end, and, for nbkube, the bytes the Go runtime allocated per request (from its
// /metrics, go_memstats_alloc_bytes_total), the garbage that collections must follow.
type memory struct {
	rss            int64
	allocated      float64 // bytes allocated over the measurement (warm-up included), if allocatedKnown
	requests       int64
	elapsed        time.Duration
	allocatedKnown bool
}

// allocatedBytes reads go_memstats_alloc_bytes_total from s's /metrics; ok is false for a
// server without it (Jupyter Server).
func allocatedBytes(s *server) (float64, bool) {
	if s.name != "nbkube" {
		return 0, false
	}
	req, err := http.NewRequest(http.MethodGet, s.base+"metrics", nil)
	if err != nil {
		return 0, false
	}
	req.Header.Set("Authorization", "token "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_alloc_bytes_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// perRequest is the bytes allocated per request, as text.
func (m memory) perRequest() string {
	if !m.allocatedKnown || m.requests == 0 {
		return "–"
	}
	per := m.allocated / float64(m.requests)
	if per >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", per/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", per/(1<<10))
}

// rate is the allocation rate, MiB/s.
func (m memory) rate() string {
	if !m.allocatedKnown || m.elapsed <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", m.allocated/(1<<20)/m.elapsed.Seconds())
}
