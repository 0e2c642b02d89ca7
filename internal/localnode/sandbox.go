package localnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// issuedToken is a service account token and when to ask for a new one.
type issuedToken struct {
	token     string
	refreshAt time.Time
}

// prepareSandbox gives the pod its address and volumes, and refreshes volumes whose service
// account tokens are due or whose Secrets and ConfigMaps are to be read again.
func (w *podWorker) prepareSandbox(ctx context.Context, now time.Time) {
	if now.Before(w.sandboxRetryAt) {
		return
	}
	if w.ip == "" {
		if w.pod.Spec.HostNetwork {
			w.ip = hostIP
		} else {
			ip, err := w.node.addresses.allocate()
			if err != nil {
				w.log.Error(err, "Allocating a pod IP")
				w.sandboxRetryAt = now.Add(w.node.cfg.CrashLoopBackOff)
				return
			}
			w.ip = ip
		}
	}
	if w.sandboxReady && !w.volumesStale && (w.volumesRefreshAt.IsZero() || now.Before(w.volumesRefreshAt)) {
		return
	}
	dirs, refreshAt, err := w.setUpVolumes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.event(w.podRef(), corev1.EventTypeWarning, eventFailedMount, err.Error())
		}
		w.sandboxRetryAt = now.Add(w.node.cfg.CrashLoopBackOff)
		return
	}
	w.volumeDirs, w.volumesRefreshAt, w.sandboxReady, w.volumesStale = dirs, refreshAt, true, false
}

// setUpVolumes materialises every volume of the pod as a host directory.
func (w *podWorker) setUpVolumes(ctx context.Context) (map[string]string, time.Time, error) {
	pod := w.pod
	secrets, configMaps := volumeReferences(pod)
	objs, err := w.node.fetchObjects(ctx, pod.Namespace, secrets, configMaps)
	if err != nil {
		return nil, time.Time{}, err
	}
	ec := w.envContext(objs)
	tokens := func(ctx context.Context, src *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
		key := fmt.Sprintf("%s/%d", src.Audience, ptr.Deref(src.ExpirationSeconds, 0))
		if t, ok := w.tokens[key]; ok && w.node.cfg.Clock.Now().Before(t.refreshAt) {
			return t.token, t.refreshAt, nil
		}
		token, refreshAt, err := w.node.requestToken(ctx, pod, src)
		if err == nil {
			w.tokens[key] = issuedToken{token, refreshAt}
		}
		return token, refreshAt, err
	}
	dirs := make(map[string]string, len(pod.Spec.Volumes))
	var refreshAt time.Time
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		dir := filepath.Join(w.podDir, "volumes", v.Name)
		var err error
		switch {
		case v.HostPath != nil:
			dir, err = v.HostPath.Path, prepareHostPath(v.HostPath)
		case v.PersistentVolumeClaim != nil:
			dir = claimDir(&w.node.cfg, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			err = os.MkdirAll(dir, 0o755)
		case v.EmptyDir != nil:
			err = os.MkdirAll(dir, 0o755)
		default:
			var p payload
			var at time.Time
			p, at, err = volumePayload(ctx, v, ec, tokens)
			if err == nil {
				err = writePayload(dir, p)
			}
			if !at.IsZero() && (refreshAt.IsZero() || at.Before(refreshAt)) {
				refreshAt = at
			}
		}
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err)
		}
		dirs[v.Name] = dir
	}
	if len(secrets)+len(configMaps) > 0 {
		if at := w.node.cfg.Clock.Now().Add(w.node.cfg.VolumeResync); refreshAt.IsZero() || at.Before(refreshAt) {
			refreshAt = at
		}
	}
	return dirs, refreshAt, nil
}

func (w *podWorker) envContext(objs podObjects) envContext {
	return envContext{pod: w.pod, podIP: w.ip, allocatable: w.node.capacity, objects: objs, host: w.node.hostEnv}
}

// releaseIP gives the pod's address back, once: a second release could drop the lock of
// another pod that took the address in between, and two agents would then share it.
func (w *podWorker) releaseIP() {
	if !w.ipReleased {
		w.ipReleased = true
		w.node.addresses.release(w.ip)
	}
}

func (w *podWorker) removePodDir() {
	if err := os.RemoveAll(w.podDir); err != nil {
		w.log.Error(err, "Removing the pod directory", "dir", w.podDir)
	}
}
