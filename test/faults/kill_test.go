//go:build faults

package faults

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/crds"
	"github.com/nbkube/nbkube/internal/testenv"
)

// saveTarget is how many saves the kill scenario makes at least, and minKills how many kills
// at least come among them: it goes on until it has both.
const (
	saveTarget = 1000
	minKills   = 10
	// tempPrefix is the contents store's name for its temporary files (".~nbkube-<hex>.tmp").
	tempPrefix = ".~nbkube-"
)

// killNotebooks are the notebooks saved over and over, by size of their one big cell.
var killNotebooks = []struct {
	name string
	size int
}{
	{"small.ipynb", 200},
	{"medium.ipynb", 40 << 10},
	{"large.ipynb", 300 << 10},
	{"huge.ipynb", 1 << 20},
}

// TestKill_SavesSurviveKill9OfTheAPIServer saves four notebooks (200 B to 1 MiB) a thousand
// times through `nbkube apiserver`, a real process over a real kube-apiserver and etcd, and
// SIGKILLs it at random moments, restarting it each time. After every kill, each notebook on
// disk must be complete, valid nbformat 4 JSON, and one of the versions the test sent since
// the last one the server acknowledged (an acknowledged save is never lost, an unacknowledged
// one lands whole or not at all); after every restart the listing shows the notebooks alone,
// whatever temporary files the kills left; in the end the leftovers are swept once stale,
// and the directory can be deleted.
func TestKill_SavesSurviveKill9OfTheAPIServer(t *testing.T) {
	bin := nbkubeBinary(t)
	cp := testenv.ControlPlane(t, false)
	if err := crds.Install(t.Context(), cp.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, agenttoken.KeySize)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(dir, "agent_token_key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	token := fmt.Sprintf("%x", key[:24])
	addr := testenv.FreeAddr(t)
	srv := &apiProcess{
		t: t, bin: bin, base: "http://" + addr + "/", token: token,
		args: []string{"apiserver", "--listen", addr, "--token", token,
			"--cookie-secret-file", filepath.Join(dir, "cookie_secret"), "--agent-token-key-file", keyFile,
			"--root", root, "--namespace", "default", "--metrics-bind-address", "0", "--health-probe-bind-address", "0"},
		env:     append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath()),
		logPath: filepath.Join(dir, "apiserver.log"),
	}
	t.Cleanup(srv.kill)
	srv.start()

	state := make([]*saveState, len(killNotebooks))
	for i := range state {
		state[i] = &saveState{}
	}
	var (
		mu          sync.Mutex
		acked       int
		attempts    int
		failed      int
		stop        = make(chan struct{})
		workersDone sync.WaitGroup
	)
	hc := &http.Client{Timeout: 60 * time.Second}
	for i, nb := range killNotebooks {
		workersDone.Add(1)
		go func() {
			defer workersDone.Done()
			st := state[i]
			for version := 1; ; version++ {
				select {
				case <-stop:
					return
				default:
				}
				body := saveBody(i, version, nb.size)
				mu.Lock()
				st.attempted = append(st.attempted, version)
				attempts++
				mu.Unlock()
				status, err := srv.put(hc, "api/contents/d/"+nb.name, body)
				mu.Lock()
				switch {
				case err == nil && (status == http.StatusOK || status == http.StatusCreated):
					st.acked, st.attempted = version, nil
					acked++
				case err != nil && errors.Is(err, syscall.ECONNREFUSED):
					// Never sent: the server is down, being restarted.
					st.attempted = st.attempted[:len(st.attempted)-1]
					attempts--
				case err == nil:
					t.Errorf("save %d of %s: status %d", version, nb.name, status)
				default:
					failed++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}

	kills, landed, leftoversSeen := 0, 0, map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	timedOut := false
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return acked
	}
	for running := true; running; {
		// A kill after a random 20 to 80 further saves, at a random moment of the saves under
		// way. The saves go on until there have been saveTarget of them and minKills kills: on
		// a fast machine the random moment alone can take a hundred saves, and a run of 1000
		// saves had only 8 kills.
		next := ackedNow() + 20 + mathrand.IntN(61)
		if ackedNow() >= saveTarget && kills >= minKills {
			close(stop)
		}
		for running && ackedNow() < next {
			select {
			case <-stop:
				running = false
			case <-time.After(2 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				timedOut, running = true, false
			}
		}
		if !running {
			continue
		}
		time.Sleep(time.Duration(mathrand.IntN(40_000)) * time.Microsecond)
		srv.kill()
		kills++
		// The server is dead: the files cannot change while they are checked.
		mu.Lock()
		for i, nb := range killNotebooks {
			if v := checkOnDisk(t, filepath.Join(root, "d", nb.name), i, nb.size, state[i]); v != state[i].acked {
				// The save in flight had landed whole, unacknowledged.
				landed++
			}
		}
		mu.Unlock()
		for _, n := range leftovers(t, filepath.Join(root, "d")) {
			leftoversSeen[n] = true
		}
		if t.Failed() {
			break
		}
		srv.start()
		srv.listingIsClean(hc, "api/contents/d", notebookNames())
	}
	select {
	case <-stop:
	default:
		close(stop)
	}
	workersDone.Wait()
	if timedOut {
		t.Fatalf("%d saves in 3 minutes", acked)
	}
	if t.Failed() {
		return
	}
	if kills < minKills {
		t.Errorf("%d kills during %d saves, want at least %d", kills, saveTarget, minKills)
	}

	// After a last kill and restart, every notebook reads back through the API as valid,
	// and as the version on disk.
	srv.kill()
	srv.start()
	srv.listingIsClean(hc, "api/contents/d", notebookNames())
	intact := 0
	for i, nb := range killNotebooks {
		v := checkOnDisk(t, filepath.Join(root, "d", nb.name), i, nb.size, state[i])
		m := srv.getJSON(hc, "api/contents/d/"+nb.name)
		if msg, _ := m["message"].(string); msg != "" {
			t.Errorf("%s: the server finds it invalid: %s", nb.name, msg)
		}
		content, _ := m["content"].(map[string]any)
		if got := versionOf(content); got != v {
			t.Errorf("%s: the API reads version %d, the disk holds %d", nb.name, got, v)
		}
		if v > 0 && msgOK(m) {
			intact++
		}
	}
	left := leftovers(t, filepath.Join(root, "d"))
	srv.kill()

	// The leftovers go with the first listing once stale (an hour: never a save under way),
	// and then nothing keeps the directory from being deleted for good.
	later := clocktesting.NewFakePassiveClock(time.Now().Add(2 * time.Hour))
	store, err := contents.New(root, contents.Options{Clock: later, DeletePermanently: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Get(t.Context(), "d", contents.GetOptions{Content: true}); err != nil {
		t.Fatal(err)
	}
	if rest := leftovers(t, filepath.Join(root, "d")); len(rest) > 0 {
		t.Errorf("stale leftovers %v remain after a listing", rest)
	}
	for _, nb := range killNotebooks {
		if err := store.Delete(t.Context(), "admin", "d/"+nb.name); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Delete(t.Context(), "admin", "d"); err != nil {
		t.Errorf("delete the directory the kills left temporary files in: %v", err)
	}
	figure(t, "kill-saves", "saves", acked, "attempts", attempts, "failed", failed, "kills", kills, "unacked_landed", landed,
		"notebooks", len(killNotebooks), "intact", intact, "leftovers", len(leftoversSeen), "leftovers_at_end", len(left),
		"restart_mean_ms", (srv.startTime / time.Duration(srv.starts)).Milliseconds(), "restart_max_ms", srv.maxTime.Milliseconds())
	if intact != len(killNotebooks) {
		t.Errorf("%d of %d notebooks intact", intact, len(killNotebooks))
	}
}

func msgOK(m map[string]any) bool {
	msg, _ := m["message"].(string)
	return msg == "" && m["type"] == "notebook"
}

func notebookNames() []string {
	var names []string
	for _, nb := range killNotebooks {
		names = append(names, nb.name)
	}
	return names
}

// saveState is what the test knows of one notebook: the last version the server
// acknowledged, and the versions sent since, whose fate the kill decided.
type saveState struct {
	acked     int
	attempted []int
}

// notebookContent is version v of notebook i: one code cell of about size bytes whose text
// depends on both, so that any mix of two versions is caught.
func notebookContent(i, v, size int) map[string]any {
	line := fmt.Sprintf("x = %d  # notebook %d version %d ", v, i, v)
	var src strings.Builder
	for src.Len() < size {
		src.WriteString(line)
		src.WriteString(strings.Repeat("abcdefghij", 6))
		src.WriteString("\n")
	}
	return map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{"faults": map[string]any{"version": v}},
		"cells": []any{map[string]any{
			"cell_type": "code", "id": fmt.Sprintf("c%d", i), "metadata": map[string]any{},
			"execution_count": nil, "outputs": []any{}, "source": src.String(),
		}},
	}
}

func saveBody(i, v, size int) []byte {
	b, err := json.Marshal(map[string]any{"type": "notebook", "content": notebookContent(i, v, size)})
	if err != nil {
		panic(err)
	}
	return b
}

// versionOf is the version a notebook's metadata names, 0 when it names none.
func versionOf(nb map[string]any) int {
	md, _ := nb["metadata"].(map[string]any)
	f, _ := md["faults"].(map[string]any)
	v, _ := f["version"].(float64)
	return int(v)
}

// checkOnDisk checks notebook i's file: absent only if no save was ever acknowledged, else
// complete valid JSON of nbformat 4 equal to a version it may hold. It returns that version.
func checkOnDisk(t *testing.T, path string, i, size int, st *saveState) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && st.acked == 0 {
		return 0
	}
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return 0
	}
	var nb map[string]any
	if err := json.Unmarshal(data, &nb); err != nil {
		t.Errorf("%s: %d bytes, not complete JSON: %v", filepath.Base(path), len(data), err)
		return 0
	}
	if nb["nbformat"] != 4.0 {
		t.Errorf("%s: nbformat %v", filepath.Base(path), nb["nbformat"])
	}
	v := versionOf(nb)
	if v != st.acked && !slices.Contains(st.attempted, v) {
		t.Errorf("%s holds version %d; acknowledged %d, sent since %v", filepath.Base(path), v, st.acked, st.attempted)
		return v
	}
	want := notebookContent(i, v, size)["cells"].([]any)[0].(map[string]any)["source"]
	cells, _ := nb["cells"].([]any)
	if len(cells) != 1 {
		t.Errorf("%s version %d: %d cells", filepath.Base(path), v, len(cells))
		return v
	}
	if got := joinSource(cells[0].(map[string]any)["source"]); got != want {
		t.Errorf("%s version %d: the cell's source differs from the one sent (%d bytes, want %d)", filepath.Base(path), v, len(got), len(want.(string)))
	}
	return v
}

// joinSource is a cell's source as one string: nbformat stores it as a list of lines.
func joinSource(s any) string {
	switch s := s.(type) {
	case string:
		return s
	case []any:
		var b strings.Builder
		for _, l := range s {
			str, _ := l.(string)
			b.WriteString(str)
		}
		return b.String()
	}
	return ""
}

// leftovers are the store's temporary files in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// apiProcess is `nbkube apiserver` run as a process, killed and restarted by the test on
// the same address.
type apiProcess struct {
	t                  *testing.T
	bin, base, token   string
	args, env          []string
	logPath            string
	cmd                *exec.Cmd
	exited             chan struct{}
	starts             int
	startTime, maxTime time.Duration
}

func (p *apiProcess) start() {
	t := p.t
	t.Helper()
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// One server at a time: a second one could not listen, and the first would go on.
	p.kill()
	p.starts++
	fmt.Fprintf(log, "----- start %d\n", p.starts)
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Env = p.env
	// Nothing outlives the test binary, even one that dies.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	began := time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.exited = make(chan struct{})
	cmd, exited := p.cmd, p.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	hc := &http.Client{Timeout: 2 * time.Second}
	testenv.Eventually(t, "the API server answers", 60*time.Second, func() error {
		select {
		case <-exited:
			p.showLog()
			t.Fatalf("nbkube apiserver exited: %v", cmd.ProcessState)
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, p.base+"api/status", nil)
		req.Header.Set("Authorization", "token "+p.token)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	d := time.Since(began)
	p.startTime += d
	p.maxTime = max(p.maxTime, d)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *apiProcess) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}

func (p *apiProcess) showLog() {
	data, _ := os.ReadFile(p.logPath)
	if len(data) > 8000 {
		data = data[len(data)-8000:]
	}
	p.t.Logf("apiserver log (tail):\n%s", data)
}

func (p *apiProcess) put(hc *http.Client, path string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPut, p.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "token "+p.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

func (p *apiProcess) getJSON(hc *http.Client, path string) map[string]any {
	t := p.t
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.base+path, nil)
	req.Header.Set("Authorization", "token "+p.token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, data)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return m
}

// listingIsClean checks that the directory lists only names among want (the notebooks saved
// so far): no temporary file shows.
func (p *apiProcess) listingIsClean(hc *http.Client, path string, want []string) {
	t := p.t
	t.Helper()
	m := p.getJSON(hc, path)
	entries, _ := m["content"].([]any)
	for _, e := range entries {
		name, _ := e.(map[string]any)["name"].(string)
		if !slices.Contains(want, name) {
			t.Errorf("the listing of %s shows %q", path, name)
		}
	}
}
