//go:build faults

package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/go-logr/logr"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

const (
	testToken = "faults-token-0123456789abcdef0123456789abcdef"
	// fullSaves is how many saves the volume-full scenario tries on the full volume.
	fullSaves = 20
)

// TestVolumeFull_SavesAre507AndTheOldFileStaysIntact runs the API server over a contents
// root on a 2 MiB tmpfs: a real file system that runs out of space. Once it is full, saves of
// an existing notebook, of a new one and a checkpoint are refused with 507 and Jupyter's
// error body; the notebook keeps its bytes, and no temporary file stays behind to hold the
// space. Once space is freed, the same save works.
func TestVolumeFull_SavesAre507AndTheOldFileStaysIntact(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", vol, "tmpfs", 0, "size=2m"); err != nil {
		testenv.Missing(t, "mount a 2 MiB tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(vol, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", vol, err)
		}
	})
	store, err := contents.New(vol, contents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv, err := apiserver.New(apiserver.Options{
		Token: testToken, User: identity.User{Name: "alice", Admin: true}, CookieSecret: bytes.Repeat([]byte("k"), 32),
		Contents: store, Log: logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	call := func(method, path string, body []byte) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "token "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if len(data) > 0 {
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("%s %s: %d, body %q is not JSON", method, path, resp.StatusCode, data)
			}
		}
		return resp.StatusCode, m
	}

	const size = 100 << 10
	if status, m := call(http.MethodPut, "/api/contents/a.ipynb", saveBody(0, 1, size)); status != http.StatusCreated {
		t.Fatalf("first save: %d %v", status, m)
	}
	path := filepath.Join(vol, "a.ipynb")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	// Fill what is left, as a kernel writing a large file would.
	filler := filepath.Join(vol, "filler.bin")
	fillVolume(t, filler)

	refused, intact := 0, 0
	for v := 2; v < 2+fullSaves; v++ {
		status, m := call(http.MethodPut, "/api/contents/a.ipynb", saveBody(0, v, size))
		msg, _ := m["message"].(string)
		if status != http.StatusInsufficientStorage || !strings.HasPrefix(msg, "No room to write a.ipynb") {
			t.Errorf("save %d on a full volume: %d %v, want 507 and a message naming the file", v, status, m)
		} else {
			refused++
		}
		if _, ok := m["reason"]; !ok {
			t.Errorf("save %d on a full volume: error body %v lacks Jupyter's reason", v, m)
		}
		if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
			t.Errorf("after save %d on a full volume the notebook has changed (%d bytes, was %d; %v)", v, len(after), len(before), err)
		} else {
			intact++
		}
	}
	if status, m := call(http.MethodPut, "/api/contents/b.ipynb", saveBody(1, 1, size)); status != http.StatusInsufficientStorage {
		t.Errorf("new notebook on a full volume: %d %v, want 507", status, m)
	}
	if _, err := os.Stat(filepath.Join(vol, "b.ipynb")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused new notebook exists: %v", err)
	}
	// A checkpoint is still made: a link to the notebook's inode takes no blocks (its copy of
	// its own, in the background, waits for room), and it holds the notebook as it is.
	if status, m := call(http.MethodPost, "/api/contents/a.ipynb/checkpoints", nil); status != http.StatusCreated {
		t.Errorf("checkpoint on a full volume: %d %v, want 201", status, m)
	} else if id, _ := m["id"].(string); id == "" {
		t.Errorf("checkpoint on a full volume: %v", m)
	} else if cp, err := os.ReadFile(filepath.Join(vol, ".ipynb_checkpoints", "a-"+id+".ipynb")); err != nil || !bytes.Equal(cp, before) {
		t.Errorf("the checkpoint made on a full volume holds %d bytes, the notebook %d (%v)", len(cp), len(before), err)
	}
	// A listing still works, shows what it did, and a refused save holds no space.
	if status, m := call(http.MethodGet, "/api/contents", nil); status != http.StatusOK || len(m["content"].([]any)) != 2 {
		t.Errorf("listing of the full volume: %d %v, want a.ipynb and filler.bin", status, m)
	}
	// An admin sees the full volume in the metrics, apart from failures of the server.
	metrics := getText(t, hs.URL+"/metrics")
	for _, want := range []string{
		fmt.Sprintf(`nbkube_contents_operations_total{operation="save",outcome="no_space"} %d`, fullSaves+1),
		`nbkube_contents_operations_total{operation="create_checkpoint",outcome="ok"} 1`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	left := leftovers(t, vol)
	if len(left) > 0 {
		t.Errorf("refused saves left temporary files %v, holding space", left)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	status, m := call(http.MethodPut, "/api/contents/a.ipynb", saveBody(0, 100, size))
	if status != http.StatusOK {
		t.Fatalf("save once space is freed: %d %v", status, m)
	}
	st := &saveState{acked: 100}
	if v := checkOnDisk(t, path, 0, size, st); v != 100 {
		t.Errorf("after space is freed the notebook holds version %d, want 100", v)
	}
	figure(t, "volume-full", "refused", refused, "status", http.StatusInsufficientStorage, "intact", intact,
		"leftovers", len(left), "saved_after_freeing", status == http.StatusOK)
}

// fillVolume writes name until the file system has no room left.
func fillVolume(t *testing.T, name string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte("x"), 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the volume: %v", err)
			}
			break
		}
	}
	// Bytes of a partial last page may still fit.
	for {
		if _, err := f.Write([]byte("x")); err != nil {
			break
		}
	}
}

// getText GETs url with the token and returns its body.
func getText(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "token "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, data)
	}
	return string(data)
}
