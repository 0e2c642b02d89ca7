package main

import (
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nbkube/nbkube/internal/builder"
)

func TestRSTFlags_TakeWhatTheChartPasses(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f rstFlags
	o := builder.DefaultRSTRendererOptions()
	bindRSTFlags(fs, &f, &o)
	if err := fs.Parse([]string{"--rst-renderer=false", "--rst-renderer-owner=rel-manager", "--rst-renderer-replicas=3",
		"--rst-renderer-image=img:1", "--rst-renderer-python=python3,/usr/bin/python3",
		`--rst-renderer-resources={"limits":{"cpu":"1","memory":"512Mi"},"requests":{"cpu":"10m","memory":"64Mi"}}`}); err != nil {
		t.Fatal(err)
	}
	if f.enabled || f.owner != "rel-manager" || o.Replicas != 3 || o.Image != "img:1" || !cmp.Equal(o.Python, []string{"python3", "/usr/bin/python3"}) {
		t.Errorf("flags %+v, options %+v", f, o)
	}
	if m := o.Resources.Limits.Memory(); m.Cmp(resource.MustParse("512Mi")) != 0 {
		t.Errorf("memory limit %v", m)
	}
	if err := fs.Parse([]string{"--rst-renderer-replicas=-1"}); err == nil {
		t.Error("negative replicas accepted")
	}
}
