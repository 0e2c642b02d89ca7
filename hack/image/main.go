// Command image builds a single-layer OCI image from a directory and writes it as a
// docker-archive tarball, without a container engine or a registry (neither is reachable
// here). `ctr -n k8s.io images import` and `docker load` both take the result.
//
//	go run ./hack/image -rootfs DIR -tag REF -o OUT.tar [-entrypoint PATH]... [-user UID:GID]
//	    [-env K=V]... [-workdir DIR] [-root-owned]
//
// The directory becomes the image's /: owners, modes, symlinks and hard links are kept (a
// debootstrapped root file system needs them); device nodes, sockets and pipes are left out,
// since the runtime provides /dev.
package main

import (
	"archive/tar"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type list []string

func (l *list) String() string     { return fmt.Sprint(*l) }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var entrypoint, env list
	rootfs := flag.String("rootfs", "", "directory that becomes the image's root file system")
	tag := flag.String("tag", "", "image reference, e.g. nbkube.io/nbkube:dev (use a tag other than latest: pods then do not pull)")
	out := flag.String("o", "", "tarball to write")
	user := flag.String("user", "", "user the image runs as, e.g. 65532:65532")
	workdir := flag.String("workdir", "", "working directory of the image's process")
	arch := flag.String("arch", runtime.GOARCH, "architecture recorded in the image")
	chown := flag.Bool("root-owned", false, "record every file as owned by root, whoever owns it here (for trees staged by a normal user)")
	flag.Var(&entrypoint, "entrypoint", "entrypoint argument (repeat for each)")
	flag.Var(&env, "env", "K=V environment of the image's process (repeat for each)")
	flag.Parse()
	if *rootfs == "" || *tag == "" || *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	cfg := v1.Config{Entrypoint: entrypoint, User: *user, WorkingDir: *workdir, Env: env}
	if err := build(*rootfs, *tag, *out, *arch, *chown, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func build(rootfs, tag, out, arch string, rootOwned bool, cfg v1.Config) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	if st, err := os.Stat(rootfs); err != nil || !st.IsDir() {
		return fmt.Errorf("rootfs %s is not a directory", rootfs)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		r, w := io.Pipe()
		go func() { w.CloseWithError(writeTree(w, rootfs, rootOwned)) }()
		return r, nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", arch, cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	// Written beside the destination and renamed, so that a failed build leaves no half tarball.
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// writeTree writes the directory as a tar stream with paths relative to it.
func writeTree(w io.Writer, root string, rootOwned bool) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (device, inode) of files with several links → first path
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		target := ""
		if mode&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, target)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		st, _ := info.Sys().(*syscall.Stat_t)
		if st != nil {
			if !rootOwned {
				hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
			}
			if mode.IsRegular() && st.Nlink > 1 {
				key := [2]uint64{st.Dev, st.Ino}
				if first, ok := links[key]; ok {
					hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				} else {
					links[key] = hdr.Name
				}
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
