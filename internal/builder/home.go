package builder

import (
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// KernelHome is the directory of the contents volume that k's pod mounts (its subPath; ""
// for the whole volume): HomeOf its owner and its spec's home.
func KernelHome(k *nbv1.Kernel, o Options) (string, error) {
	return HomeOf(k.Spec.Owner, k.Spec.Home, o)
}

// HomeOf is the directory of the contents volume that the pod of a kernel or terminal of
// owner whose spec names home mounts (its subPath; "" for the whole volume): home, else the
// owner's home when users have homes, else the whole volume. The manager cannot tell admins
// from other users, so a kernel or terminal made with kubectl gets its owner's home unless
// whoever made it (with the right to create them, an admin's) names another home.
func HomeOf(owner nbv1.Owner, home string, o Options) (string, error) {
	switch home {
	case nbv1.HomeWholeVolume:
		return "", nil
	case "":
	default:
		return home, nil
	}
	return o.UserHome.For(string(owner))
}

// OwnClaim is the claim of its owner's that k's pod may mount in place of its home on the
// contents volume: OwnClaimOf its owner and its spec's home.
func OwnClaim(k *nbv1.Kernel, o Options) (string, error) {
	return OwnClaimOf(k.Spec.Owner, k.Spec.Home, o)
}

// OwnClaimOf is the claim of owner's that the pod of a kernel or terminal of theirs whose
// spec names home may mount in place of its home on the contents volume: named when the
// manager has claims per user and the home is the owner's (an admin's pod over the whole
// volume, or a home named in its spec, keeps the shared volume). Whether the claim exists is
// the caller's to find out; the admin makes claims.
func OwnClaimOf(owner nbv1.Owner, home string, o Options) (string, error) {
	if !o.HomeClaims.On() || home == nbv1.HomeWholeVolume {
		return "", nil
	}
	owners, err := o.UserHome.For(string(owner))
	if err != nil || owners == "" {
		return "", err
	}
	if mounted, err := HomeOf(owner, home, o); err != nil || mounted != owners {
		return "", err
	}
	return o.HomeClaims.For(string(owner))
}

// UseClaim makes a kernel or terminal pod mount claim, whole, where its home on the contents volume was.
func UseClaim(pod *corev1.Pod, claim string) {
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Name == "contents" && v.PersistentVolumeClaim != nil {
			v.PersistentVolumeClaim.ClaimName = claim
		}
	}
	c := &pod.Spec.Containers[0]
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == "contents" {
			c.VolumeMounts[i].SubPath = ""
		}
	}
}

// dropContents removes the contents volume and its mount from a kernel or terminal pod's
// spec.
func dropContents(spec *corev1.PodSpec) {
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "contents" })
	c := &spec.Containers[0]
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "contents" })
	c.WorkingDir = HomeDir
}

// NotebookDir is the working directory of the kernel of a session of the notebook at p
// (relative to the contents root): Jupyter starts a notebook's kernel in its directory.
func NotebookDir(p string) string {
	dir := path.Dir(p)
	if dir == "." || dir == "/" {
		return ""
	}
	return dir
}
