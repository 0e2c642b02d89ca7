package builder

import (
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

// dropContents removes the contents volume and its mount from a kernel pod's spec.
func dropContents(spec *corev1.PodSpec) {
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "contents" })
	c := &spec.Containers[0]
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "contents" })
	c.WorkingDir = HomeDir
}
