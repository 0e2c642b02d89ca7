// Package config holds the generated manifests (CRDs, RBAC) and the kustomize overlays; the
// CRDs are embedded so that `nbkube local` installs exactly what `make manifests` generated.
package config

import "embed"

// CRDs are the CustomResourceDefinitions, crd/bases/*.yaml.
//
//go:embed crd/bases/*.yaml
var CRDs embed.FS
