package main

import (
	"flag"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/homes"
)

// bindBuilderFlags exposes the settings of the objects the controllers create.
func bindBuilderFlags(fs *flag.FlagSet, o *builder.Options) {
	fs.StringVar(&o.AgentImage, "agent-image", o.AgentImage, "image the kernel pods take the nbkube agent from (this operator's image)")
	fs.StringVar(&o.AgentBinary, "agent-binary", o.AgentBinary, "path of the nbkube-agent binary inside --agent-image")
	fs.Func("agent-delivery", "how kernel pods get the agent out of --agent-image: InitContainer (copied by an init container; works everywhere), ImageVolume (the image mounted as a volume, no init container: needs Kubernetes' ImageVolume and containerd 2.1+ or CRI-O 1.31+ on the nodes) or Auto (ImageVolume while every node has kubelet 1.36+ and such a runtime, else InitContainer; needs to list nodes) (default Auto)", func(s string) error {
		d, err := builder.ParseAgentDelivery(s)
		o.AgentDelivery = d
		return err
	})
	fs.StringVar(&o.DefaultKernelImage, "kernel-image", o.DefaultKernelImage, "image of kernels whose KernelSpec names none")
	fs.StringVar(&o.DefaultClusterImage, "cluster-image", o.DefaultClusterImage, "image of clusters that name none (needs ipyparallel)")
	fs.StringVar(&o.DaskDashboardBase, "dask-dashboard-base-url", o.DaskDashboardBase, "the API server's --base-url: dask schedulers serve their dashboards under <base-url>dask/<cluster>/, where the API server proxies them (default /)")
	fs.BoolVar(&o.ClusterControllerByPodIP, "cluster-by-pod-ip", o.ClusterControllerByPodIP, "engines and kernels reach a cluster's ipcontroller at its pod IP instead of its Service (for nodes without Services)")
	fs.StringVar(&o.ContentsClaim, "contents-claim", o.ContentsClaim, "PersistentVolumeClaim with the notebooks, mounted into kernel pods")
	fs.Func("home-claim", "`template` of the name of each user's own PersistentVolumeClaim, e.g. home-{username}: a kernel in its owner's home mounts that claim, where one exists, instead of the home's subPath of --contents-claim; each must hold the same directory as the user's home on it (default: off)", func(s string) error {
		c, err := homes.ParseClaims(s)
		o.HomeClaims = c
		return err
	})
	fs.Func("image-pull-policy", "pull policy of kernel and cluster containers (Always, IfNotPresent, Never; default: Kubernetes')", func(s string) error {
		o.ImagePullPolicy = corev1.PullPolicy(s)
		return nil
	})
	fs.Int64Var(&o.RunAsUser, "run-as-user", o.RunAsUser, "user id of kernel and cluster processes")
	fs.Int64Var(&o.RunAsGroup, "run-as-group", o.RunAsGroup, "group id of kernel and cluster processes and their volumes")
	quantityFlag(fs, &o.ScratchSize, "scratch-size", "size limit of each scratch volume (home, /tmp) of kernel and cluster pods; the kubelet evicts a pod that writes more (0: unbounded)")
	quantityFlag(fs, &o.AgentMemoryBudget, "agent-memory-budget", "memory each kernel's agent may hold for clients inside the kernel's container, beyond which slow clients are cut off (0: the agent's default, 256Mi)")
	quantityFlag(fs, &o.ScratchRequest, "scratch-request", "ephemeral storage requested by kernel and cluster containers whose resources name none (0: none)")
}

// quantityFlag binds a Kubernetes quantity (1Gi, 500M, 0) to a flag.
func quantityFlag(fs *flag.FlagSet, q *resource.Quantity, name, usage string) {
	fs.Func(name, usage+" (default "+q.String()+")", func(s string) error {
		v, err := resource.ParseQuantity(s)
		if err != nil {
			return err
		}
		if v.Sign() < 0 {
			return fmt.Errorf("%s must not be negative", s)
		}
		*q = v
		return nil
	})
}
