// Package daskcluster asks a Dask scheduler (Debian's python3-distributed 2022.12) about its
// workers and retires workers through it, over the scheduler's own HTTP routes on its
// dashboard port, and makes the TLS files with which a cluster's scheduler, workers and its
// owner's kernels know each other. See docs/dask.md.
package daskcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"
)

// Ports of a cluster's pods.
const (
	// SchedulerPort is where the scheduler takes workers and clients (TLS).
	SchedulerPort = 8786
	// HTTPPort is the scheduler's HTTP server: its JSON routes, the API routes nbkube turns
	// on, and its dashboard where the image has Bokeh.
	HTTPPort = 8787
	// WorkerPort is where a worker takes the scheduler, other workers and clients (TLS).
	WorkerPort = 8788
)

// HTTPRoutes are the scheduler's HTTP routes nbkube turns on, as the value of
// DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES: Dask's defaults with the API routes
// (retire_workers, adaptive_target), which are off by default, and without the proxy route
// (which makes the scheduler fetch from any host named in its path).
const HTTPRoutes = "['distributed.http.scheduler.prometheus', 'distributed.http.scheduler.info', " +
	"'distributed.http.scheduler.json', 'distributed.http.scheduler.api', 'distributed.http.health', " +
	"'distributed.http.statics']"

// maxAnswer bounds what is read of one answer: a scheduler runs a user's image, and its
// answers must not make the operator allocate without bound. 1024 workers' identities fit.
const maxAnswer = 8 << 20

// Worker is one worker the scheduler knows.
type Worker struct {
	// Name is the name the worker registered under: nbkube's workers give their pod's name.
	Name    string
	Address string
	// Executing is the number of tasks the worker runs; Queued those it holds to run.
	Executing, Queued int
}

// Status is what the scheduler says of its cluster.
type Status struct {
	// Workers, sorted by name.
	Workers []Worker
	// Tasks is the number of tasks the scheduler holds; Processing those assigned to workers.
	Tasks, Processing int
}

// Client asks schedulers over HTTP.
type Client struct {
	HTTP *http.Client
}

func (c Client) hc() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Query asks the scheduler whose HTTP server is at base (http://host:8787) which workers it
// has and how busy they are.
func (c Client) Query(ctx context.Context, base string) (Status, error) {
	var identity struct {
		Workers map[string]struct {
			Name    any `json:"name"`
			Metrics struct {
				TaskCounts map[string]int `json:"task_counts"`
			} `json:"metrics"`
		} `json:"workers"`
	}
	if err := c.get(ctx, base+"/json/identity.json", &identity); err != nil {
		return Status{}, err
	}
	var counts struct {
		Tasks      int `json:"tasks"`
		Processing int `json:"processing"`
	}
	if err := c.get(ctx, base+"/json/counts.json", &counts); err != nil {
		return Status{}, err
	}
	st := Status{Tasks: counts.Tasks, Processing: counts.Processing}
	for addr, w := range identity.Workers {
		tc := w.Metrics.TaskCounts
		st.Workers = append(st.Workers, Worker{
			Name:      fmt.Sprint(w.Name),
			Address:   addr,
			Executing: tc["executing"] + tc["long-running"],
			Queued:    tc["ready"] + tc["constrained"] + tc["waiting"] + tc["fetch"] + tc["flight"] + tc["missing"],
		})
	}
	sort.Slice(st.Workers, func(i, j int) bool { return st.Workers[i].Name < st.Workers[j].Name })
	return st, nil
}

// Retire retires the workers at addresses through the scheduler: it stops giving them tasks,
// moves the results only they hold to other workers, and forgets them; their tasks in flight
// go to other workers. The workers' processes are the caller's to end after.
func (c Client) Retire(ctx context.Context, base string, addresses []string) error {
	body, err := json.Marshal(map[string]any{"workers": addresses})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/retire_workers", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc().Do(req)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("retire workers: %s", resp.Status)
	}
	return nil
}

// AdaptiveTarget is the number of workers the scheduler would have for its current load
// (Dask's adaptive_target: by the tasks' expected run time, and never below the workers that
// hold results).
func (c Client) AdaptiveTarget(ctx context.Context, base string) (int, error) {
	var target struct {
		Workers *int `json:"workers"`
	}
	if err := c.get(ctx, base+"/api/v1/adaptive_target", &target); err != nil {
		return 0, err
	}
	if target.Workers == nil {
		return 0, errors.New("adaptive target: no workers in the answer")
	}
	return *target.Workers, nil
}

func (c Client) get(ctx context.Context, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc().Do(req)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if len(b) > maxAnswer {
		return fmt.Errorf("GET %s: answer larger than %d bytes", url, maxAnswer)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

func drain(r io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r, 64<<10))
	_ = r.Close()
}

// RetireTimeout bounds a retirement: moving the results only the retired workers hold takes
// as long as the network needs for them, and a worker that cannot hand them over in this long
// is stopped anyway (Dask computes what was lost again from the tasks' lineage).
const RetireTimeout = 60 * time.Second
