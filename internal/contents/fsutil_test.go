package contents

import (
	"os"
	"syscall"
	"testing"
)

func TestWriteFile_FailedWriteLeavesOldFileIntact(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"f.txt": "old content"})
	err := s.writeFile("f.txt", false, func(w *os.File) error {
		if _, err := w.WriteString("half"); err != nil {
			return err
		}
		return syscall.EIO // the process dies or the disk fails mid-write
	})
	if err == nil {
		t.Fatal("failing write succeeded")
	}
	if got := readFile(t, dir, "f.txt"); got != "old content" {
		t.Errorf("f.txt = %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}
