package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nbkube/nbkube/internal/daskcluster"
	"github.com/nbkube/nbkube/internal/jpclient"
)

// The dask section: how long a user waits for a Dask cluster of 2 workers, from asking for it
// until Client().wait_for_workers(2) returns in a notebook, under nbkube local; and the same
// Dask processes started by hand, the floor nbkube's cluster start costs over.
const (
	daskStarts  = 5
	daskWorkers = 2
	daskTimeout = 3 * time.Minute
)

type daskReport struct {
	// ready: POST /api/clusters until the API says the workers are registered; client: until
	// a kernel attached to the cluster returned from wait_for_workers; bare: the processes
	// started by hand until a client returned from wait_for_workers.
	ready, client, bare []time.Duration
	err, bareErr        error
}

func measureDask(nb *server, work string) *daskReport {
	rep := &daskReport{}
	c := &kernelClient{s: nb, hc: &http.Client{Timeout: daskTimeout}}
	for i := range daskStarts {
		waitQuiet([]*server{nb})
		ready, client, err := daskStart(c, fmt.Sprintf("bench-%d", i), false)
		if err != nil {
			rep.err = err
			break
		}
		rep.ready, rep.client = append(rep.ready, ready), append(rep.client, client)
		fmt.Fprintf(os.Stderr, "bench: dask cluster %d: workers registered in %v, wait_for_workers returned in %v\n", i, ready.Round(time.Millisecond), client.Round(time.Millisecond))
		waitQuiet([]*server{nb})
		d, err := daskBare(filepath.Join(work, fmt.Sprintf("dask-bare-%d", i)))
		if err != nil {
			rep.bareErr = err
			continue
		}
		rep.bare = append(rep.bare, d)
		fmt.Fprintf(os.Stderr, "bench: dask processes by hand %d: wait_for_workers returned in %v\n", i, d.Round(time.Millisecond))
	}
	return rep
}

// daskStart makes a dask cluster of daskWorkers workers through the API, opens a notebook
// attached to it, and waits there for the workers; then deletes both. The notebook opens at
// once with attachEarly (in a cluster, where the scheduler's address is its Service's), else
// as soon as the API says its scheduler answers (under nbkube local a kernel reads the
// scheduler's address, its pod's, when it starts).
func daskStart(c *kernelClient, profile string, attachEarly bool) (ready, client time.Duration, err error) {
	t0 := time.Now()
	body := fmt.Sprintf(`{"profile":%q,"n":%d,"framework":"dask"}`, profile, daskWorkers)
	if err := c.expect(http.MethodPost, "api/clusters", body, http.StatusCreated, nil); err != nil {
		return 0, 0, err
	}
	defer func() {
		err = errors.Join(err, c.expect(http.MethodDelete, "api/clusters/"+profile, "", http.StatusNoContent, nil))
	}()
	var m struct {
		ControllerReady bool `json:"controller_ready"`
		EnginesReady    int  `json:"engines_ready"`
	}
	var session struct {
		ID     string `json:"id"`
		Kernel struct {
			ID string `json:"id"`
		} `json:"kernel"`
	}
	var k *kernelConn
	defer func() {
		if k != nil {
			k.close()
		}
		if session.ID != "" {
			err = errors.Join(err, c.expect(http.MethodDelete, "api/sessions/"+session.ID, "", http.StatusNoContent, nil))
		}
	}()
	for time.Since(t0) < daskTimeout && (session.ID == "" || ready == 0) {
		if err := c.expect(http.MethodGet, "api/clusters/"+profile, "", http.StatusOK, &m); err != nil {
			return 0, 0, err
		}
		if (attachEarly || m.ControllerReady) && session.ID == "" {
			body := fmt.Sprintf(`{"path":%q,"type":"notebook","name":%q,"kernel":{"name":"python3"},"cluster":%q}`, profile+".ipynb", profile+".ipynb", profile)
			if err := c.expect(http.MethodPost, "api/sessions", body, http.StatusCreated, &session); err != nil {
				return 0, 0, err
			}
			if k, err = c.dial(session.Kernel.ID); err != nil {
				return 0, 0, err
			}
		}
		if m.EnginesReady == daskWorkers && ready == 0 {
			ready = time.Since(t0)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if session.ID == "" || ready == 0 {
		return 0, 0, fmt.Errorf("dask cluster %s: not ready in %v: %+v", profile, daskTimeout, m)
	}
	var failed string
	code := fmt.Sprintf(`import os
from dask.distributed import Client
assert os.environ["DASK_SCHEDULER_ADDRESS"].startswith("tls://")
Client(timeout=60).wait_for_workers(%d, timeout=120)`, daskWorkers)
	if err := k.execute(code, func(m *jpclient.Msg) error {
		if m.Header.MsgType == "error" {
			failed = string(m.Content)
		}
		return nil
	}); err != nil {
		return 0, 0, err
	}
	if failed != "" {
		return 0, 0, fmt.Errorf("dask cluster %s: the notebook's client failed: %.500s", profile, failed)
	}
	return ready, time.Since(t0), nil
}

// expect makes a request and wants status; the answer's JSON goes into into when not nil.
func (c *kernelClient) expect(method, path, body string, status int, into any) error {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	resp, err := c.do(method, path, r)
	if err != nil {
		return fmt.Errorf("%s /%s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s /%s: %w", method, path, err)
	}
	if resp.StatusCode != status {
		return fmt.Errorf("%s /%s: status %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if into != nil {
		return json.Unmarshal(b, into)
	}
	return nil
}

// daskBare starts the processes a dask cluster's pods run, as nbkube's builder runs them (TLS,
// the scheduler's HTTP routes), by hand, and times until a client returns from
// wait_for_workers.
func daskBare(dir string) (time.Duration, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	creds, err := daskcluster.NewCredentials(rand.Reader, "bench", time.Now())
	if err != nil {
		return 0, err
	}
	files := map[string][]byte{"ca.crt": creds.CA, "tls.crt": creds.Cert, "tls.key": creds.Key}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return 0, err
		}
	}
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	address := "tls://127.0.0.1:" + strconv.Itoa(port)
	tls := []string{"--tls-ca-file=" + filepath.Join(dir, "ca.crt"), "--tls-cert=" + filepath.Join(dir, "tls.crt"), "--tls-key=" + filepath.Join(dir, "tls.key")}
	env := append(os.Environ(), "HOME="+dir, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True",
		"DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES="+daskcluster.HTTPRoutes)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			_ = p.Wait()
		}
	}()
	start := func(argv ...string) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, cmd)
		return nil
	}
	t0 := time.Now()
	if err := start(slices.Concat([]string{"dask-scheduler", "--protocol=tls", "--host=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--dashboard-address=127.0.0.1:0"}, tls)...); err != nil {
		return 0, err
	}
	for i := range daskWorkers {
		if err := start(slices.Concat([]string{"dask-worker", address, "--name=w" + strconv.Itoa(i), "--no-nanny", "--protocol=tls",
			"--host=127.0.0.1", "--dashboard-address=127.0.0.1:0", "--local-directory=" + dir, "--death-timeout=60"}, tls)...); err != nil {
			return 0, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), daskTimeout)
	defer cancel()
	client := exec.CommandContext(ctx, "/usr/bin/python3", "-c", fmt.Sprintf(`import time
from dask.distributed import Client
for attempt in range(600):
    try:
        c = Client(timeout=1)
        break
    except OSError:
        time.sleep(0.05)
c.wait_for_workers(%d, timeout=120)`, daskWorkers))
	client.Env = append(env, "DASK_SCHEDULER_ADDRESS="+address,
		"DASK_DISTRIBUTED__COMM__TLS__CA_FILE="+filepath.Join(dir, "ca.crt"),
		"DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT="+filepath.Join(dir, "tls.crt"),
		"DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY="+filepath.Join(dir, "tls.key"))
	if out, err := client.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("dask by hand: %w: %.500s", err, out)
	}
	return time.Since(t0), nil
}

func writeDask(b *strings.Builder, rep *daskReport) {
	b.WriteString("## Dask clusters\n\n")
	fmt.Fprintf(b, "A dask cluster of %d workers ([dask.md](dask.md)), %d times under `nbkube local`: asked for with `POST /api/clusters` "+
		"(`\"framework\": \"dask\"`), a notebook opened on it as soon as the API says its scheduler answers (a kernel reads the scheduler's "+
		"address when it starts), until `Client().wait_for_workers(%d)` returns in that notebook. Beside it, the same `dask-scheduler` and "+
		"`dask-worker` processes with the same TLS started by hand, until a client's `wait_for_workers(%d)` returns: what a cluster costs "+
		"without nbkube. Target: under 10 s (Dask Gateway's figure).\n\n", daskWorkers, daskStarts, daskWorkers, daskWorkers)
	if rep.err != nil {
		fmt.Fprintf(b, "nbkube: not measured: %v\n\n", rep.err)
	}
	if rep.bareErr != nil {
		fmt.Fprintf(b, "By hand: not measured: %v\n\n", rep.bareErr)
	}
	row := func(name string, ds []time.Duration) {
		if len(ds) == 0 {
			return
		}
		s := slices.Sorted(slices.Values(ds))
		fmt.Fprintf(b, "| %s | %.1f s | %.1f s |\n", name, s[len(s)/2].Seconds(), s[len(s)-1].Seconds())
	}
	b.WriteString("| from the request | p50 | max |\n| --- | --- | --- |\n")
	row("nbkube: workers registered (the API's `engines_ready`)", rep.ready)
	row("nbkube: `wait_for_workers` returned in the notebook", rep.client)
	row("the processes by hand: `wait_for_workers` returned", rep.bare)
	b.WriteString("\n")
}
