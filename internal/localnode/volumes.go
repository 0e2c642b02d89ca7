package localnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// defaultFileMode is the mode of projected files when the volume sets no defaultMode (the API
// server defaults it to 0644 too; this covers objects that bypassed defaulting).
const defaultFileMode fs.FileMode = 0o644

// errUnsupported marks a pod the node cannot run at all; the pod fails instead of waiting.
var errUnsupported = errors.New("not supported by the local node")

// volumeKind is the JSON name of the source a volume uses ("emptyDir", "csi", ...), found by
// reflection so that a kind added to the API later still gets a precise message.
func volumeKind(src *corev1.VolumeSource) string {
	v := reflect.ValueOf(src).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return "unknown"
}

// checkVolumes fails a pod with a volume the node cannot provide, wrapping errUnsupported.
func checkVolumes(pod *corev1.Pod) error {
	for _, v := range pod.Spec.Volumes {
		switch kind := volumeKind(&v.VolumeSource); kind {
		case "emptyDir", "secret", "configMap", "persistentVolumeClaim", "hostPath", "downwardAPI":
		case "projected":
			for _, src := range v.Projected.Sources {
				if src.Secret == nil && src.ConfigMap == nil && src.DownwardAPI == nil && src.ServiceAccountToken == nil {
					return fmt.Errorf("volume %s: projected sources other than secret, configMap, downwardAPI and serviceAccountToken are %w", v.Name, errUnsupported)
				}
			}
		default:
			return fmt.Errorf("volume %s: %s volumes are %w", v.Name, kind, errUnsupported)
		}
	}
	return nil
}

// volumeReferences lists the Secrets and ConfigMaps the pod's volumes project.
func volumeReferences(pod *corev1.Pod) (secrets, configMaps []string) {
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			secrets = append(secrets, v.Secret.SecretName)
		case v.ConfigMap != nil:
			configMaps = append(configMaps, v.ConfigMap.Name)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					secrets = append(secrets, src.Secret.Name)
				}
				if src.ConfigMap != nil {
					configMaps = append(configMaps, src.ConfigMap.Name)
				}
			}
		}
	}
	return secrets, configMaps
}

// fileProjection is one file of a secret, configMap, downwardAPI or projected volume.
type fileProjection struct {
	data []byte
	mode fs.FileMode
}

// payload is the content of such a volume, by path relative to the volume's directory.
type payload map[string]fileProjection

// tokenSource issues a service account token bound to the pod for a projection and tells when
// it should be refreshed.
type tokenSource func(ctx context.Context, src *corev1.ServiceAccountTokenProjection) (token string, refreshAt time.Time, err error)

// volumePayload computes the files of a volume that projects data (secret, configMap,
// downwardAPI, projected), and the time its tokens need refreshing (zero if it has none).
func volumePayload(ctx context.Context, v *corev1.Volume, ec envContext, tokens tokenSource) (payload, time.Time, error) {
	p := payload{}
	var refreshAt time.Time
	switch {
	case v.Secret != nil:
		s := v.Secret
		err := addSecret(p, ec.objects, s.SecretName, s.Items, s.DefaultMode, isOptional(s.Optional))
		return p, refreshAt, err
	case v.ConfigMap != nil:
		c := v.ConfigMap
		err := addConfigMap(p, ec.objects, c.Name, c.Items, c.DefaultMode, isOptional(c.Optional))
		return p, refreshAt, err
	case v.DownwardAPI != nil:
		err := addDownwardAPI(p, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, ec)
		return p, refreshAt, err
	case v.Projected != nil:
		mode := v.Projected.DefaultMode
		for _, src := range v.Projected.Sources {
			var err error
			switch {
			case src.Secret != nil:
				err = addSecret(p, ec.objects, src.Secret.Name, src.Secret.Items, mode, isOptional(src.Secret.Optional))
			case src.ConfigMap != nil:
				err = addConfigMap(p, ec.objects, src.ConfigMap.Name, src.ConfigMap.Items, mode, isOptional(src.ConfigMap.Optional))
			case src.DownwardAPI != nil:
				err = addDownwardAPI(p, src.DownwardAPI.Items, mode, ec)
			case src.ServiceAccountToken != nil:
				token, at, terr := tokens(ctx, src.ServiceAccountToken)
				if terr != nil {
					return nil, time.Time{}, fmt.Errorf("requesting a service account token: %w", terr)
				}
				p[src.ServiceAccountToken.Path] = fileProjection{data: []byte(token), mode: fileMode(mode)}
				if refreshAt.IsZero() || at.Before(refreshAt) {
					refreshAt = at
				}
			}
			if err != nil {
				return nil, time.Time{}, err
			}
		}
		return p, refreshAt, nil
	}
	return nil, time.Time{}, fmt.Errorf("volume %s projects no data", v.Name)
}

func addSecret(p payload, objs podObjects, name string, items []corev1.KeyToPath, mode *int32, optional bool) error {
	s, found, err := findObject(objs.secrets, "secret", name, optional)
	if !found {
		return err
	}
	return addKeys(p, "secret", s.Data, items, mode, optional)
}

func addConfigMap(p payload, objs podObjects, name string, items []corev1.KeyToPath, mode *int32, optional bool) error {
	cm, found, err := findObject(objs.configMaps, "configmap", name, optional)
	if !found {
		return err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return addKeys(p, "configmap", data, items, mode, optional)
}

// addKeys projects every key of data, or with items only the listed keys at their paths, with
// an item's mode before the volume's defaultMode.
func addKeys(p payload, kind string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool) error {
	if len(items) == 0 {
		for k, v := range data {
			p[k] = fileProjection{data: v, mode: fileMode(defaultMode)}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("%s references non-existent key: %s", kind, it.Key)
		}
		mode := defaultMode
		if it.Mode != nil {
			mode = it.Mode
		}
		p[it.Path] = fileProjection{data: v, mode: fileMode(mode)}
	}
	return nil
}

func addDownwardAPI(p payload, items []corev1.DownwardAPIVolumeFile, defaultMode *int32, ec envContext) error {
	for _, it := range items {
		var (
			v   string
			err error
		)
		switch {
		case it.FieldRef != nil:
			v, err = podFieldValue(ec.pod, it.FieldRef.FieldPath, ec.podIP)
		case it.ResourceFieldRef != nil:
			v, err = resourceFieldValue(it.ResourceFieldRef, ec.pod, "", ec.allocatable)
		}
		if err != nil {
			return fmt.Errorf("downward API file %s: %w", it.Path, err)
		}
		mode := defaultMode
		if it.Mode != nil {
			mode = it.Mode
		}
		p[it.Path] = fileProjection{data: []byte(v), mode: fileMode(mode)}
	}
	return nil
}

func fileMode(m *int32) fs.FileMode {
	if m == nil {
		return defaultFileMode
	}
	return fs.FileMode(*m) & fs.ModePerm
}

// writePayload writes a payload into dir. Each file is replaced by rename, so a process that
// reads a token while it is refreshed sees the old or the new one, never a torn file.
func writePayload(dir string, p payload) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, rel := range sortedKeys(p) {
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("file path %q must be relative and stay inside the volume", rel)
		}
		target := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := writeFileAtomic(target, p[rel]); err != nil {
			return fmt.Errorf("writing %s: %w", rel, err)
		}
	}
	return nil
}

// writeFileAtomic replaces target with f's data and mode, unless it has them already.
func writeFileAtomic(target string, f fileProjection) error {
	if old, err := os.ReadFile(target); err == nil && bytes.Equal(old, f.data) {
		if fi, err := os.Stat(target); err == nil && fi.Mode().Perm() == f.mode.Perm() {
			return nil
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".tmp-"+filepath.Base(target)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(f.data); err != nil {
		tmp.Close()
		return err
	}
	// Chmod rather than a create mode, which the umask would narrow.
	if err := tmp.Chmod(f.mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), target)
}

// claimDir is the host directory of a PersistentVolumeClaim: ClaimDirs by "namespace/claim",
// then by "claim", else a directory of the node's own that outlives the pods using it. There is
// no provisioner here, so the PVC object itself is not consulted.
func claimDir(cfg *Config, namespace, claim string) string {
	if d, ok := cfg.ClaimDirs[namespace+"/"+claim]; ok {
		return d
	}
	if d, ok := cfg.ClaimDirs[claim]; ok {
		return d
	}
	return filepath.Join(cfg.DataDir, "volumes", namespace, claim)
}

// prepareHostPath applies a hostPath volume's type: the *OrCreate types create what is missing,
// the others check what is there.
func prepareHostPath(hp *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	switch t {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		return os.MkdirAll(hp.Path, 0o755)
	case corev1.HostPathFileOrCreate:
		f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	fi, err := os.Stat(hp.Path)
	if err != nil {
		return err
	}
	var ok bool
	switch t {
	case corev1.HostPathDirectory:
		ok = fi.IsDir()
	case corev1.HostPathFile:
		ok = fi.Mode().IsRegular()
	case corev1.HostPathSocket:
		ok = fi.Mode()&fs.ModeSocket != 0
	case corev1.HostPathCharDev:
		ok = fi.Mode()&fs.ModeCharDevice != 0
	case corev1.HostPathBlockDev:
		ok = fi.Mode()&fs.ModeDevice != 0 && fi.Mode()&fs.ModeCharDevice == 0
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", hp.Path, t)
	}
	return nil
}
