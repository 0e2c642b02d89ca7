package main

import (
	"flag"

	corev1 "k8s.io/api/core/v1"

	"github.com/nbkube/nbkube/internal/builder"
)

// bindBuilderFlags exposes the settings of the objects the controllers create.
func bindBuilderFlags(fs *flag.FlagSet, o *builder.Options) {
	fs.StringVar(&o.AgentImage, "agent-image", o.AgentImage, "image the kernel pods copy the nbkube agent from (this operator's image)")
	fs.StringVar(&o.AgentBinary, "agent-binary", o.AgentBinary, "path of the nbkube-agent binary inside --agent-image")
	fs.StringVar(&o.DefaultKernelImage, "kernel-image", o.DefaultKernelImage, "image of kernels whose KernelSpec names none")
	fs.StringVar(&o.DefaultClusterImage, "cluster-image", o.DefaultClusterImage, "image of clusters that name none (needs ipyparallel)")
	fs.BoolVar(&o.ClusterControllerByPodIP, "cluster-by-pod-ip", o.ClusterControllerByPodIP, "engines and kernels reach a cluster's ipcontroller at its pod IP instead of its Service (for nodes without Services)")
	fs.StringVar(&o.ContentsClaim, "contents-claim", o.ContentsClaim, "PersistentVolumeClaim with the notebooks, mounted into kernel pods")
	fs.Func("image-pull-policy", "pull policy of kernel and cluster containers (Always, IfNotPresent, Never; default: Kubernetes')", func(s string) error {
		o.ImagePullPolicy = corev1.PullPolicy(s)
		return nil
	})
	fs.Int64Var(&o.RunAsUser, "run-as-user", o.RunAsUser, "user id of kernel and cluster processes")
	fs.Int64Var(&o.RunAsGroup, "run-as-group", o.RunAsGroup, "group id of kernel and cluster processes and their volumes")
}
