package localnode

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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
			if endsInError(t, err, tt.wantErr) {
				return
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
		{name: "csi", volume: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "x"}}, want: "volume v: csi volumes are not supported by the local node"},
		{name: "nfs", volume: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}, want: "volume v: nfs volumes are not supported by the local node"},
		{name: "cluster trust bundle", volume: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "b"}}}}}, want: "projected sources other than"},
		{name: "emptyDir", volume: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, want: ""},
		{name: "persistentVolumeClaim", volume: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}, want: ""},
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
		{ns: "team", claim: "contents", want: "/srv/team"},
		{ns: "other", claim: "contents", want: "/srv/all"},
		{ns: "team", claim: "scratch", want: "/data/volumes/team/scratch"},
	} {
		if got := claimDir(cfg, tt.ns, tt.claim); got != tt.want {
			t.Errorf("claimDir(%s, %s) = %s, want %s", tt.ns, tt.claim, got, tt.want)
		}
	}
}
