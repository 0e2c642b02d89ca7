package apiserver_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// An upload abandoned in a home, or in the volume's root, is removed by the server's sweep
// timer: nobody starts another upload there, which is the only other thing that sweeps.
func TestUploads_ServingSweepsAbandonedUploadsInTheRootAndHomes(t *testing.T) {
	root := t.TempDir()
	clk := clocktesting.NewFakePassiveClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	store, err := contents.New(root, contents.Options{Clock: clk, UploadTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	tpl, err := homes.Parse("{username}")
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{"ann": userToken(t, "ann"), "root": userToken(t, "root")}
	path := filepath.Join(t.TempDir(), "users.yaml")
	writeUsersFile(t, path, tokens, "root")
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{CheckEvery: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := serving(t, root, apiserver.Options{Token: testToken, User: apiserver.User{Name: "alice"}, CookieSecret: []byte(strings.Repeat("k", 32)),
		Providers: []identity.Provider{users}, Homes: tpl, Contents: store, TrashSweepInterval: 10 * time.Millisecond})

	chunk1 := map[string]any{"type": "file", "format": "base64", "chunk": 1, "content": "YWJj"}
	for user, dir := range map[string]string{"ann": filepath.Join(root, "ann"), "root": root} {
		r := s.do("PUT", "/api/contents/big.bin", chunk1, "Authorization", "token "+tokens[user])
		if r.status != http.StatusOK && r.status != http.StatusCreated {
			t.Fatalf("%s's chunk 1: %d %s", user, r.status, r.body)
		}
		// The store's clock stands still, so no sweep may have taken it.
		if n := uploadEntries(t, dir); n != 2 {
			t.Fatalf("%s's upload has %d files in %s, want its partial and state files", user, n, dir)
		}
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	testenv.Eventually(t, "the abandoned uploads are swept", 10*time.Second, func() error {
		for _, dir := range []string{filepath.Join(root, "ann"), root} {
			if n := uploadEntries(t, dir); n != 0 {
				return fmt.Errorf("%d upload files left in %s", n, dir)
			}
		}
		return nil
	})
}

// uploadEntries counts the files in the uploads directory of the store rooted at dir.
func uploadEntries(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ".nbkube", "uploads"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(entries)
}
