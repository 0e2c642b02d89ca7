package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nbkube/nbkube/internal/builder"
)

// rstFlags decide whether the manager keeps the reStructuredText renderer of
// /rstservice/render, and its shape.
type rstFlags struct {
	enabled bool
	owner   string
}

func bindRSTFlags(fs *flag.FlagSet, f *rstFlags, o *builder.RSTRendererOptions) {
	fs.BoolVar(&f.enabled, "rst-renderer", true, "run the reStructuredText renderer of /rstservice/render (docutils in pods of the kernel image); false removes it")
	fs.StringVar(&f.owner, "rst-renderer-owner", "", "the manager's Deployment: the renderer's objects become its dependents, so they go with it")
	fs.StringVar(&o.Image, "rst-renderer-image", o.Image, "image of the renderer, with python3 and docutils (default: --kernel-image)")
	fs.Func("rst-renderer-replicas", fmt.Sprintf("replicas of the renderer (default %d)", o.Replicas), func(s string) error {
		var n int32
		if _, err := fmt.Sscan(s, &n); err != nil || n < 0 {
			return fmt.Errorf("not a number of replicas: %q", s)
		}
		o.Replicas = n
		return nil
	})
	fs.Func("rst-renderer-python", "Python interpreters the renderer tries in turn, comma-separated (default python3)", func(s string) error {
		o.Python = strings.Split(s, ",")
		return nil
	})
	fs.Func("rst-renderer-resources", `resources of the renderer's container, as JSON ({"requests":{"memory":"64Mi"},"limits":{...}})`, func(s string) error {
		var r corev1.ResourceRequirements
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			return fmt.Errorf("renderer resources: %w", err)
		}
		o.Resources = r
		return nil
	})
}
