package localnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestPodWorker_ReleasesItsAddressOnceSoAnotherPodKeepsIt(t *testing.T) {
	dir := t.TempDir()
	pool, other := newAddressPool(dir), newAddressPool(dir)
	ip, err := pool.allocate()
	if err != nil {
		t.Fatal(err)
	}
	done := &podWorker{node: &Node{addresses: pool}, ip: ip}
	done.releaseIP() // the pod reached a final phase
	next, err := pool.allocate()
	if err != nil || next != ip {
		t.Fatalf("the freed address was not reused: %s, %v", next, err)
	}
	done.releaseIP() // ... and then it was deleted
	got, err := other.allocate()
	if err != nil {
		t.Fatal(err)
	}
	if got == ip {
		t.Errorf("%s was handed out again while the next pod holds it", ip)
	}
}

// A volume refresh, as the node's periodic sync and Secret changes make, reads the node's cache
// instead of the API, reuses a service account token until it is due, and rewrites only the
// files whose data changed.
func TestSetUpVolumes_RefreshReadsTheCacheReusesTokensAndRewritesOnlyChanges(t *testing.T) {
	client := fake.NewClientset()
	var tokenRequests, secretReads atomic.Int32
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		n := tokenRequests.Add(1)
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("token-%d", n)}}, nil
	})
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		secretReads.Add(1)
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	n, err := New(client, Config{DataDir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	n.secrets, n.configMaps = corelisters.NewSecretLister(secrets), corelisters.NewConfigMapLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "team"}, Data: map[string][]byte{"password": []byte("one"), "user": []byte("ann")}}
	if err := secrets.Add(secret); err != nil {
		t.Fatal(err)
	}
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}},
		{Name: "api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
		}}}},
	}
	w := newPodWorker(n, pod)
	setUp := func() map[string]string {
		t.Helper()
		dirs, _, err := w.setUpVolumes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return dirs
	}
	inode := func(path string) uint64 {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}

	dirs := setUp()
	password, user := filepath.Join(dirs["creds"], "password"), filepath.Join(dirs["creds"], "user")
	passwordIno, userIno := inode(password), inode(user)
	changed := secret.DeepCopy()
	changed.Data["password"] = []byte("two")
	if err := secrets.Update(changed); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	setUp()

	if got := volumeFiles(t, dirs["creds"]); got["password"] != "-rw-r--r-- two" || got["user"] != "-rw-r--r-- ann" {
		t.Errorf("secret volume after the change: %v", got)
	}
	if inode(password) == passwordIno {
		t.Error("the changed file was not replaced by a new one (rename)")
	}
	if inode(user) != userIno {
		t.Error("the unchanged file was rewritten")
	}
	if got := volumeFiles(t, dirs["api"])["token"]; got != "-rw-r--r-- token-1" || tokenRequests.Load() != 1 {
		t.Errorf("token file %q after %d token requests; want the first token, asked for once", got, tokenRequests.Load())
	}
	if secretReads.Load() != 0 {
		t.Errorf("%d reads of the Secret from the API; the cache has it", secretReads.Load())
	}

	// Past 80% of its hour the token is asked for again.
	clk.Step(50 * time.Minute)
	setUp()
	if got := volumeFiles(t, dirs["api"])["token"]; got != "-rw-r--r-- token-2" {
		t.Errorf("token file %q once due; want a new token", got)
	}
}
