package localnode

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

// volumeFiles reads back what a volume directory holds: content and permission bits by path.
func volumeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		got[rel] = fi.Mode().Perm().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func noTokens(context.Context, *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	panic("no token expected")
}

func TestVolumePayload_WritesSecretAndConfigMapFilesWithTheirModes(t *testing.T) {
	tests := []struct {
		name    string
		volume  corev1.VolumeSource
		want    map[string]string
		wantErr string
	}{{
		name:   "every key with the default mode",
		volume: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}},
		want:   map[string]string{"password": "-rw-r--r-- hunter2", "user": "-rw-r--r-- admin"},
	}, {
		name: "items at their paths, an item mode before the default mode",
		volume: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  "db",
			DefaultMode: ptr.To[int32](0o440),
			Items: []corev1.KeyToPath{
				{Key: "password", Path: "creds/pw", Mode: ptr.To[int32](0o400)},
				{Key: "user", Path: "user.txt"},
			},
		}},
		want: map[string]string{"creds/pw": "-r-------- hunter2", "user.txt": "-r--r----- admin"},
	}, {
		name:    "an item naming a missing key",
		volume:  corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db", Items: []corev1.KeyToPath{{Key: "nope", Path: "x"}}}},
		wantErr: "secret references non-existent key: nope",
	}, {
		name: "an optional missing key is skipped",
		volume: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db", Optional: ptr.To(true),
			Items: []corev1.KeyToPath{{Key: "nope", Path: "x"}, {Key: "user", Path: "u"}}}},
		want: map[string]string{"u": "-rw-r--r-- admin"},
	}, {
		name:    "a missing secret",
		volume:  corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent"}},
		wantErr: `secret "absent" not found`,
	}, {
		name:   "a missing optional secret gives an empty volume",
		volume: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: ptr.To(true)}},
		want:   map[string]string{},
	}, {
		name: "a configMap",
		volume: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
			DefaultMode:          ptr.To[int32](0o600),
		}},
		want: map[string]string{"MODE": "-rw------- fast", "LEVEL": "-rw------- 3"},
	}, {
		name: "the downward API",
		volume: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}, Mode: ptr.To[int32](0o444)},
		}}},
		want: map[string]string{"labels": "-rw-r--r-- app=\"web\"\ntier=\"front\"", "name": "-r--r--r-- web-0"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &corev1.Volume{Name: "v", VolumeSource: tt.volume}
			p, _, err := volumePayload(context.Background(), v, envContext{pod: testPod(), objects: testObjects()}, noTokens)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "v")
			if err := writePayload(dir, p); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, volumeFiles(t, dir)); diff != "" {
				t.Errorf("volume files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVolumePayload_ProjectsTokensAndSaysWhenToRefreshThem(t *testing.T) {
	refresh := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tokens := func(_ context.Context, src *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
		return "token-for-" + src.Audience, refresh, nil
	}
	v := &corev1.Volume{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", Audience: "api", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
				Items: []corev1.KeyToPath{{Key: "MODE", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}}
	p, at, err := volumePayload(context.Background(), v, envContext{pod: testPod(), objects: testObjects()}, tokens)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writePayload(dir, p); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"token": "-rw-r--r-- token-for-api", "ca.crt": "-rw-r--r-- fast", "namespace": "-rw-r--r-- team"}
	if diff := cmp.Diff(want, volumeFiles(t, dir)); diff != "" {
		t.Errorf("volume files (-want +got):\n%s", diff)
	}
	if !at.Equal(refresh) {
		t.Errorf("refresh at %v, want %v", at, refresh)
	}
}

func TestCheckVolumes_RejectsKindsTheNodeCannotProvide(t *testing.T) {
	tests := []struct {
		name   string
		volume corev1.VolumeSource
		want   string
	}{
		{"csi", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "x"}}, "volume v: csi volumes are not supported by the local node"},
		{"nfs", corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}, "volume v: nfs volumes are not supported by the local node"},
		{"cluster trust bundle", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "b"}}}}}, "projected sources other than"},
		{"emptyDir", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, ""},
		{"persistentVolumeClaim", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}, ""},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: tt.volume}}}}
		err := checkVolumes(pod)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error = %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestClaimDir_PrefersNamespacedThenPlainClaimDirs(t *testing.T) {
	cfg := &Config{DataDir: "/data", ClaimDirs: map[string]string{"team/contents": "/srv/team", "contents": "/srv/all"}}
	for _, tt := range []struct{ ns, claim, want string }{
		{"team", "contents", "/srv/team"},
		{"other", "contents", "/srv/all"},
		{"team", "scratch", "/data/volumes/team/scratch"},
	} {
		if got := claimDir(cfg, tt.ns, tt.claim); got != tt.want {
			t.Errorf("claimDir(%s, %s) = %s, want %s", tt.ns, tt.claim, got, tt.want)
		}
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
