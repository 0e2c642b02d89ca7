package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The outputs section: what it costs nbkube local to record the outputs of a notebook's cells
// (docs/api.md, "Outputs that outlive the browser"). Jupyter Server records none, so there is
// no column of it.
const (
	// outputWrites is how many runs whose client leaves at once are timed to the file.
	outputWrites = 30
	// awayLines is what the cell prints that runs with no client attached.
	awayLines = 20000
)

type outputsReport struct {
	err error
	// plain and recorded are the agent's CPU per message of a streamLines stream to a client
	// that stays, without and with a cell id in the request.
	plain, recorded cpuResult
	cpuErr          error
	// writes are from the kernel's idle status to the file's modification, sorted.
	writes    []time.Duration
	writesErr error
	// away is the awayLines run with no client: how long until the file had all of it, the
	// lines it had, and the agent's resident memory before and at its peak.
	away struct {
		elapsed            time.Duration
		lines              int
		rssBefore, rssPeak int64
		err                error
	}
}

const outputsNotebook = "bench-outputs.ipynb"

func measureOutputs(nbkubeBin, work string) *outputsReport {
	rep := &outputsReport{}
	dir := filepath.Join(work, "outputs")
	s, err := startNbkube(nbkubeBin, dir)
	if err != nil {
		rep.err = err
		return rep
	}
	defer s.stop()
	root := filepath.Join(dir, "root")
	streamCode := fmt.Sprintf("for i in range(%d): print(i, flush=True)", streamLines)
	awayCode := fmt.Sprintf("for i in range(%d): print(i, flush=True)", awayLines)
	cells := []any{}
	for id, src := range map[string]string{"stream": streamCode, "one": "print('x')", "away": awayCode} {
		cells = append(cells, map[string]any{"cell_type": "code", "id": id, "source": src, "metadata": map[string]any{},
			"outputs": []any{}, "execution_count": nil})
	}
	nb, _ := json.Marshal(map[string]any{"cells": cells, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5})
	if err := os.WriteFile(filepath.Join(root, outputsNotebook), nb, 0o644); err != nil {
		rep.err = err
		return rep
	}
	c := &kernelClient{s: s, hc: &http.Client{Timeout: kernelTimeout}}
	resp, err := c.do(http.MethodPost, "api/sessions", strings.NewReader(`{"path": "`+outputsNotebook+`", "type": "notebook", "kernel": {"name": "python3"}}`))
	if err != nil {
		rep.err = err
		return rep
	}
	var session struct {
		Kernel struct {
			ID string `json:"id"`
		} `json:"kernel"`
	}
	err = json.NewDecoder(resp.Body).Decode(&session)
	resp.Body.Close()
	if err != nil {
		rep.err = fmt.Errorf("POST /api/sessions: %w", err)
		return rep
	}
	if resp.StatusCode != http.StatusCreated {
		rep.err = fmt.Errorf("POST /api/sessions: status %d", resp.StatusCode)
		return rep
	}
	kernel := session.Kernel.ID
	agents, err := agentPIDs(s.pid)
	if err != nil {
		rep.err = err
		return rep
	}
	if len(agents) != 1 {
		rep.err = fmt.Errorf("agents %v, want the session's one", agents)
		return rep
	}
	agent := agents[0]

	rep.plain, rep.recorded, rep.cpuErr = recordingCPU(c, kernel, agent, streamCode)
	logOutputs("agent CPU per message %.4f ms not recorded, %.4f recorded", ms(rep.plain.perMessage), ms(rep.recorded.perMessage))
	rep.writes, rep.writesErr = timedWrites(c, kernel, root)
	if len(rep.writes) > 0 {
		logOutputs("written %.0f ms (p50) after the last message", ms(p50(rep.writes)))
	}
	rep.away.rssBefore, _ = rss(agent)
	rep.away.elapsed, rep.away.lines, rep.away.err = awayRun(c, kernel, root, awayCode)
	rep.away.rssPeak, _ = peakRSS(agent)
	return rep
}

// recordingCPU is the agent's CPU per message the client got of the stream, run as plain code
// and as a notebook's cell.
func recordingCPU(c *kernelClient, kernel string, agent int, code string) (plain, recorded cpuResult, err error) {
	k, err := c.dial(kernel)
	if err != nil {
		return plain, recorded, err
	}
	defer k.close()
	if err := k.kernelInfo(); err != nil {
		return plain, recorded, err
	}
	measure := func(run func() error) (cpuResult, error) {
		before, err := cpuTimes([]int{agent})
		if err != nil {
			return cpuResult{}, err
		}
		frames := k.Frames()
		if err := run(); err != nil {
			return cpuResult{}, err
		}
		after, err := cpuTimes([]int{agent})
		if err != nil {
			return cpuResult{}, err
		}
		n := int(k.Frames() - frames)
		return cpuResult{perMessage: cpuSpent(before, after) / time.Duration(n), relayed: n, how: fmt.Sprintf("%d messages", n)}, nil
	}
	// Taking turns, three of each, the lowest kept: the machine's other work adds, never takes.
	for range 3 {
		p, err := measure(func() error { return k.execute(code, nil) })
		if err != nil {
			return plain, recorded, err
		}
		r, err := measure(func() error { return k.executeCell("stream", code, nil) })
		if err != nil {
			return plain, recorded, err
		}
		if plain.relayed == 0 || p.perMessage < plain.perMessage {
			plain = p
		}
		if recorded.relayed == 0 || r.perMessage < recorded.perMessage {
			recorded = r
		}
	}
	return plain, recorded, nil
}

// storedRun is a cell of the notebook on the volume.
type storedRun struct {
	ExecutionCount *int `json:"execution_count"`
	Outputs        []struct {
		Text []string `json:"text"`
	} `json:"outputs"`
	Metadata struct {
		Execution map[string]string `json:"execution"`
	} `json:"metadata"`
}

// readRun reads the cell of id from the notebook file, and the file's modification time.
func readRun(root, id string) (storedRun, time.Time, error) {
	p := filepath.Join(root, outputsNotebook)
	fi, err := os.Stat(p)
	if err != nil {
		return storedRun{}, time.Time{}, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return storedRun{}, time.Time{}, err
	}
	var nb struct {
		Cells []struct {
			ID string `json:"id"`
			storedRun
		} `json:"cells"`
	}
	if err := json.Unmarshal(data, &nb); err != nil {
		return storedRun{}, time.Time{}, fmt.Errorf("the notebook is not valid JSON: %w", err)
	}
	for _, c := range nb.Cells {
		if c.ID == id {
			return c.storedRun, fi.ModTime(), nil
		}
	}
	return storedRun{}, time.Time{}, fmt.Errorf("no cell %s", id)
}

// sendAndLeave runs the cell of id in a connection it closes at once, as a tab closed right
// after Run.
func sendAndLeave(c *kernelClient, kernel, id, code string) error {
	k, err := c.dial(kernel)
	if err != nil {
		return err
	}
	defer k.close()
	if err := k.kernelInfo(); err != nil {
		return err
	}
	_, err = k.SendCell(id, code)
	return err
}

// waitRun polls the notebook until the cell of id has a new execution count and done says
// its outputs are complete.
func waitRun(root, id string, before *int, done func(storedRun) bool) (storedRun, time.Time, error) {
	deadline := time.Now().Add(kernelTimeout)
	for {
		run, mtime, err := readRun(root, id)
		if err == nil && run.ExecutionCount != nil && (before == nil || *run.ExecutionCount != *before) && done(run) {
			return run, mtime, nil
		}
		if time.Now().After(deadline) {
			return run, mtime, errors.Join(fmt.Errorf("cell %s not written within %s", id, kernelTimeout), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// timedWrites runs a one-line cell outputWrites times, each from a client that leaves at once,
// and times each from the kernel's idle status (its own date) to the file.
func timedWrites(c *kernelClient, kernel, root string) ([]time.Duration, error) {
	var lat []time.Duration
	for range outputWrites {
		before, _, err := readRun(root, "one")
		if err != nil {
			return lat, err
		}
		if err := sendAndLeave(c, kernel, "one", "print('x')"); err != nil {
			return lat, err
		}
		run, mtime, err := waitRun(root, "one", before.ExecutionCount, func(r storedRun) bool {
			return r.Metadata.Execution["iopub.status.idle"] != ""
		})
		if err != nil {
			return lat, err
		}
		idle, err := time.Parse(time.RFC3339Nano, run.Metadata.Execution["iopub.status.idle"])
		if err != nil {
			return lat, err
		}
		lat = append(lat, mtime.Sub(idle))
	}
	slices.Sort(lat)
	return lat, nil
}

// awayRun runs the awayLines cell from a client that leaves at once and waits until the
// file has every line.
func awayRun(c *kernelClient, kernel, root, code string) (time.Duration, int, error) {
	before, _, err := readRun(root, "away")
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := sendAndLeave(c, kernel, "away", code); err != nil {
		return 0, 0, err
	}
	lines := 0
	_, _, err = waitRun(root, "away", before.ExecutionCount, func(r storedRun) bool {
		lines = 0
		for _, o := range r.Outputs {
			lines += len(o.Text)
		}
		return lines >= awayLines
	})
	return time.Since(t0), lines, err
}

// peakRSS is a process's peak resident set size (VmHWM).
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			_, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM")
}

func logOutputs(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "outputs  "+format+"\n", args...)
}

func writeOutputs(b *strings.Builder, rep *outputsReport) {
	b.WriteString("\n## Outputs of cells whose client is away\n\n" +
		"`nbkube local`, one kernel of a notebook's session (docs/api.md, \"Outputs that outlive the browser\"). " +
		"Jupyter Server writes no outputs of a client that left, so it has no column.\n\n")
	if rep.err != nil {
		fmt.Fprintf(b, "Not measured: %v\n", rep.err)
		return
	}
	b.WriteString("| measure | nbkube | target |\n|---|---|---|\n")
	if rep.cpuErr != nil {
		fmt.Fprintf(b, "| agent CPU per message | not measured: %v | |\n", rep.cpuErr)
	} else {
		extra := rep.recorded.perMessage - rep.plain.perMessage
		fmt.Fprintf(b, "| agent CPU per message of a %d-line stream, client connected: plain / as a notebook's cell (ms) | %.4f / %.4f (%+.4f recording) | recording < 0.1 |\n",
			streamLines, ms(rep.plain.perMessage), ms(rep.recorded.perMessage), ms(extra))
	}
	if rep.writesErr != nil {
		fmt.Fprintf(b, "| last message → file, client gone | not measured: %v | |\n", rep.writesErr)
	} else {
		fmt.Fprintf(b, "| last message → durable file, client gone at once (p50 / p99 ms, %d runs) | %.0f / %.0f | < 1000 |\n",
			len(rep.writes), ms(p50(rep.writes)), ms(p99(rep.writes)))
	}
	if rep.away.err != nil {
		fmt.Fprintf(b, "| %d lines with no client | not measured: %v | |\n", awayLines, rep.away.err)
	} else {
		fmt.Fprintf(b, "| %d lines with no client: all in the file after (s), lines written, agent RSS before → peak (MiB) | %.1f, %d, %.1f → %.1f | none lost, memory bounded |\n",
			awayLines, rep.away.elapsed.Seconds(), rep.away.lines, float64(rep.away.rssBefore)/(1<<20), float64(rep.away.rssPeak)/(1<<20))
	}
}
