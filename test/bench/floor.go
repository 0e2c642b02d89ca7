package main

// The floor: floor.py driving ipykernel over ZMQ with jupyter_client, no server in the way.

import (
	"bufio"
	"cmp"
	"context"
	_ "embed" // floor.py
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed floor.py
var floorScript []byte

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

// floorConcurrent runs floor.py for scenario 4 alone: n kernels at once.
func floorConcurrent(python, dir string, n int) (time.Duration, error) {
	out, err := runFloor(python, dir, "--only-concurrent", strconv.Itoa(n))
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
