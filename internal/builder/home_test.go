package builder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/homes"
)

// contentsMount is the kernel container's mount of the contents volume, if any.
func contentsMount(p *corev1.Pod) (corev1.VolumeMount, bool) {
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if m.Name == "contents" {
			return m, true
		}
	}
	return corev1.VolumeMount{}, false
}

func TestKernelPod_MountsOnlyTheHomeItIsGiven(t *testing.T) {
	tpl, err := homes.Parse("users/{username}")
	if err != nil {
		t.Fatal(err)
	}
	on := DefaultOptions()
	on.UserHome = tpl
	for _, c := range []struct {
		name    string
		home    string
		o       Options
		subPath string
	}{
		{"homes off, no home: the whole volume", "", DefaultOptions(), ""},
		{"the spec's home", "users/alice", DefaultOptions(), "users/alice"},
		{"no home in the spec: the owner's from the template", "", on, "users/alice"},
		{"the spec's home wins over the template", "shared/alice", on, "shared/alice"},
		{"the whole volume, asked for explicitly", nbv1.HomeWholeVolume, on, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := testKernel(func(k *nbv1.Kernel) { k.Spec.Home, k.Spec.Path = c.home, "nb/dir" })
			p := KernelPod(k, testSpec(nil), c.o)
			m, ok := contentsMount(p)
			if !ok || m.SubPath != c.subPath || m.MountPath != ContentsDir {
				t.Fatalf("contents mount %+v (present %v), want subPath %q at %s", m, ok, c.subPath, ContentsDir)
			}
			if wd := p.Spec.Containers[0].WorkingDir; wd != ContentsDir+"/nb/dir" {
				t.Fatalf("working directory %s: path is relative to the home", wd)
			}
		})
	}
}

func TestKernelPod_OwnerWithoutAValidHomeGetsNoContents(t *testing.T) {
	o := DefaultOptions()
	var err error
	if o.UserHome, err = homes.Parse("{username}"); err != nil {
		t.Fatal(err)
	}
	k := testKernel(func(k *nbv1.Kernel) { k.Spec.Owner = ".." })
	if _, err := KernelHome(k, o); err == nil {
		t.Fatal("KernelHome accepted an owner that names no home")
	}
	p := KernelPod(k, testSpec(nil), o)
	if m, ok := contentsMount(p); ok {
		t.Fatalf("the pod mounts the contents: %+v", m)
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == "contents" {
			t.Fatal("the pod has the contents volume")
		}
	}
}

func TestOwnClaim_OnlyForTheOwnersHome(t *testing.T) {
	o := DefaultOptions()
	var err error
	if o.UserHome, err = homes.Parse("users/{username}"); err != nil {
		t.Fatal(err)
	}
	if o.HomeClaims, err = homes.ParseClaims("home-{username}"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, owner, home, want string
		fails                   bool
	}{
		{"no home in the spec: the owner's", "alice", "", "home-alice", false},
		{"the owner's home named in the spec", "alice", "users/alice", "home-alice", false},
		{"another home named in the spec: the shared volume", "alice", "users/bob", "", false},
		{"the whole volume", "alice", nbv1.HomeWholeVolume, "", false},
		{"an owner whose name makes no claim", "Alice", "", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := testKernel(func(k *nbv1.Kernel) { k.Spec.Owner, k.Spec.Home = nbv1.Owner(c.owner), c.home })
			got, err := OwnClaim(k, o)
			if got != c.want || (err != nil) != c.fails {
				t.Fatalf("OwnClaim = %q, %v; want %q (fails %v)", got, err, c.want, c.fails)
			}
		})
	}
	off := DefaultOptions()
	off.UserHome = o.UserHome
	if got, err := OwnClaim(testKernel(func(k *nbv1.Kernel) { k.Spec.Owner = "alice" }), off); got != "" || err != nil {
		t.Fatalf("claims off: OwnClaim = %q, %v", got, err)
	}
}

func TestUseClaim_MountsTheClaimWholeInPlaceOfTheHome(t *testing.T) {
	o := DefaultOptions()
	o.UserHome, _ = homes.Parse("{username}")
	k := testKernel(func(k *nbv1.Kernel) { k.Spec.Owner, k.Spec.Path = "alice", "nb" })
	p := KernelPod(k, testSpec(nil), o)
	UseClaim(p, "home-alice")
	m, ok := contentsMount(p)
	if !ok || m.SubPath != "" || m.MountPath != ContentsDir {
		t.Fatalf("contents mount %+v (present %v), want the whole claim at %s", m, ok, ContentsDir)
	}
	claims := 0
	for _, v := range p.Spec.Volumes {
		if pvc := v.PersistentVolumeClaim; pvc != nil {
			claims++
			if v.Name != "contents" || pvc.ClaimName != "home-alice" {
				t.Fatalf("volume %s mounts claim %s", v.Name, pvc.ClaimName)
			}
		}
	}
	if claims != 1 {
		t.Fatalf("%d claims in the pod, want 1", claims)
	}
	if wd := p.Spec.Containers[0].WorkingDir; wd != ContentsDir+"/nb" {
		t.Fatalf("working directory %s", wd)
	}
}
