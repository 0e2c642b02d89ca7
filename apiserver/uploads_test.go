package apiserver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/quota"
	"github.com/nbkube/nbkube/internal/repository"
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

// TestUploads_ConcurrentChunksThroughTwoReplicasNeverExceedTheAllowance: twelve first chunks
// of 300 KiB PUT at once by ann, through two API server replicas over one volume, against
// her policy's uploadBytes of 1 MiB: at most three are taken (201), the others answer 413
// with Jupyter's error, and her uploads in progress never hold more than 1 MiB on disk.
func TestUploads_ConcurrentChunksThroughTwoReplicasNeverExceedTheAllowance(t *testing.T) {
	c, ns := quotaNamespace(t)
	if err := c.Create(t.Context(), &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ann"},
		Spec: nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{UploadBytes: resourcePtr("1Mi")}}}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	replica := func() *testServer {
		return newServerAt(t, root, func(o *apiserver.Options) {
			o.Quotas = &repository.Quotas{Ledger: &quota.Ledger{Client: c, Reader: c, APIReader: c, Namespace: ns}}
			o.Providers = []identity.Provider{identity.NewToken("token-ann", identity.User{Name: "ann"})}
		})
	}
	replicas := []*testServer{replica(), replica()}
	const allowance, size, n = 1 << 20, 300 << 10, 12
	body, err := json.Marshal(map[string]any{"type": "file", "format": "base64", "chunk": 1,
		"content": base64.StdEncoding.EncodeToString(make([]byte, size))})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			s := replicas[i%2]
			req, err := http.NewRequest("PUT", fmt.Sprintf("%s/api/contents/f%d.bin", s.url, i), bytes.NewReader(body))
			if err != nil {
				answers[i].err = err
				return
			}
			req.Header.Set("Authorization", "token token-ann")
			resp, err := s.hc.Do(req)
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			answers[i].status = resp.StatusCode
			answers[i].body, answers[i].err = io.ReadAll(resp.Body)
		})
	}
	wg.Wait()
	taken := 0
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Fatalf("chunk %d: %v", i, a.err)
		case a.status == http.StatusCreated:
			taken++
		case a.status == http.StatusRequestEntityTooLarge:
			if !strings.Contains(string(a.body), "upload allowance of 1048576 bytes") || !strings.Contains(string(a.body), `"reason"`) {
				t.Errorf("chunk %d refused with %s", i, a.body)
			}
		default:
			t.Errorf("chunk %d: %d %s", i, a.status, a.body)
		}
	}
	var held int64
	entries, _ := os.ReadDir(filepath.Join(root, ".nbkube", "uploads"))
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".part") {
			held += fi.Size()
		}
	}
	if taken == 0 || taken > allowance/size || held > allowance {
		t.Errorf("%d chunks taken, %d bytes held, against an allowance of %d bytes", taken, held, allowance)
	}
}
