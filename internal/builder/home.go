package builder

import (
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// KernelHome is the directory of the contents volume that k's pod mounts (its subPath; ""
// for the whole volume): its spec's home, else its owner's home when users have homes, else
// the whole volume. The manager cannot tell admins from other users, so a kernel made with
// kubectl gets its owner's home unless whoever made it (with the right to create Kernels, an
// admin's) names another home.
func KernelHome(k *nbv1.Kernel, o Options) (string, error) {
	switch k.Spec.Home {
	case nbv1.HomeWholeVolume:
		return "", nil
	case "":
	default:
		return k.Spec.Home, nil
	}
	return o.UserHome.For(string(k.Spec.Owner))
}

// OwnClaim is the claim of its owner's that k's pod may mount in place of its home on the
// contents volume: named when the manager has claims per user and k's home is its owner's
// (an admin's kernel over the whole volume, or a home named in its spec, keeps the shared
// volume). Whether the claim exists is the caller's to find out; the admin makes claims.
func OwnClaim(k *nbv1.Kernel, o Options) (string, error) {
	if !o.HomeClaims.On() || k.Spec.Home == nbv1.HomeWholeVolume {
		return "", nil
	}
	owners, err := o.UserHome.For(string(k.Spec.Owner))
	if err != nil || owners == "" {
		return "", err
	}
	if home, err := KernelHome(k, o); err != nil || home != owners {
		return "", err
	}
	return o.HomeClaims.For(string(k.Spec.Owner))
}

// UseClaim makes a kernel pod mount claim, whole, where its home on the contents volume was.
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

// dropContents removes the contents volume and its mount from a kernel pod's spec.
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
