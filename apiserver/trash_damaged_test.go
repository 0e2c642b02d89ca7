package apiserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A user's kernel mounts their home, .nbkube included, so it can put anything in their trash.
// Each damaged entry below is planted in ann's; restoring it answers 4xx, never 500 or a
// hang, touches nothing outside her home, and her trash still lists.
func TestTrash_DamagedEntriesAreRefusedWith4xx(t *testing.T) {
	s, as := homesServer(t, "users/{username}")
	s.hc.Timeout = 10 * time.Second
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"f"}`, as("ann")...), http.StatusCreated)
	expect(t, s.do("PUT", "/api/contents/x.txt", `{"type":"file","format":"text","content":"ben's"}`, as("ben")...), http.StatusCreated)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "info"), "[Trash Info]\nPath=out.txt\nDeletionDate=2024-01-01T00:00:00\n")
	home := filepath.Join(s.root, "users", "ann")
	if err := os.Symlink(outside, filepath.Join(home, "out")); err != nil {
		t.Fatal(err)
	}
	trash := filepath.Join(home, ".nbkube", "trash", "ann")
	files, info := filepath.Join(trash, "files"), filepath.Join(trash, "info")
	for _, d := range []string{files, info} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(path string) string {
		return "[Trash Info]\nPath=" + path + "\nDeletionDate=2024-01-01T00:00:00\n"
	}
	for _, tc := range []struct {
		id, info string
		status   int
	}{
		{"garbage", "not a trash info file", 404},
		{"nopath", "[Trash Info]\nDeletionDate=2024-01-01T00:00:00\n", 404},
		{"nodate", "[Trash Info]\nPath=a.txt\n", 404},
		{"baddate", "[Trash Info]\nPath=a.txt\nDeletionDate=yesterday\n", 404},
		{"badescape", entry("a%zz"), 404},
		{"huge", entry("huge.txt") + strings.Repeat("#", 1<<20), 404},
		{"up", entry("../ben/x.txt"), 403},
		{"encodedup", entry("%2E%2E/%2E%2E/%2E%2E/x.txt"), 403},
		{"meta", entry(".nbkube/x"), 403},
		{"hidden", entry(".bashrc"), 403},
		{"nul", entry("a%00b"), 400},
		{"notutf8", entry("%FF"), 400},
		{"root", entry(""), 400},
		{"underfile", entry("f.txt/x"), 404},
		{"throughlink", entry("out/x.txt"), 403},
		{"nofile", entry("nofile.txt"), 404},
		{"infodir", "", 404},
		{"infolink", "", 404},
		{"fifo", "", 404},
	} {
		infoFile := filepath.Join(info, tc.id+".trashinfo")
		switch tc.id {
		case "infodir":
			if err := os.Mkdir(infoFile, 0o700); err != nil {
				t.Fatal(err)
			}
		case "infolink":
			if err := os.Symlink(filepath.Join(outside, "info"), infoFile); err != nil {
				t.Fatal(err)
			}
		case "fifo":
			if err := syscall.Mkfifo(infoFile, 0o600); err != nil {
				t.Fatal(err)
			}
			// Today's server would wait in the FIFO's open for a writer: be that writer at the
			// end, so that the server can close.
			t.Cleanup(func() {
				if f, err := os.OpenFile(infoFile, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			})
		default:
			writeFile(t, infoFile, tc.info)
		}
		if tc.id != "nofile" {
			writeFile(t, filepath.Join(files, tc.id), "planted")
		}
		r := s.do("POST", "/api/trash/"+tc.id+"/restore", nil, as("ann")...)
		if r.status != tc.status {
			t.Errorf("restore of %s: %d %s, want %d", tc.id, r.status, r.body, tc.status)
			continue
		}
		expect(t, r, tc.status)
		if msg := r.json(t)["message"].(string); tc.id == "garbage" && msg != "No such entry in the trash: garbage (its info file is damaged: no [Trash Info] group)" {
			t.Errorf("restore of garbage: message %q", msg)
		}
	}
	if r := s.do("GET", "/api/trash", nil, as("ann")...); r.status != http.StatusOK {
		t.Errorf("ann's trash lists %d %s", r.status, r.body)
	}
	if entries, err := os.ReadDir(outside); err != nil || len(entries) != 1 {
		t.Errorf("outside her home: %v %v", entries, err)
	}
	if data, err := os.ReadFile(filepath.Join(s.root, "users", "ben", "x.txt")); err != nil || string(data) != "ben's" {
		t.Errorf("ben's file: %q %v", data, err)
	}
	if entries, err := os.ReadDir(filepath.Join(s.root, "users", "ben")); err != nil || len(entries) != 1 {
		t.Errorf("ben's home: %v %v", entries, err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
