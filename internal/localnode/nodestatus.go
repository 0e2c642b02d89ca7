package localnode

import (
	"context"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// leaseDurationSeconds and leaseRenewInterval are the kubelet's (renewal at a quarter of the
	// duration), which kube-controller-manager's node lifecycle controller expects.
	leaseDurationSeconds = 40
	leaseRenewInterval   = 10 * time.Second
	// nodeStatusInterval is the kubelet's nodeStatusReportFrequency: a node whose status does
	// not change reports it this often, the lease being its heartbeat in between (the node
	// lifecycle controller reads either). Each report is two API requests and an etcd write,
	// which at rest here is CPU for nothing.
	nodeStatusInterval = 5 * time.Minute
	// maxPods is the kubelet's default pod capacity.
	maxPods = 110
)

// labels are the well-known labels a kubelet puts on its Node.
func (n *Node) labels() map[string]string {
	return map[string]string{
		corev1.LabelHostname:   n.cfg.NodeName,
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
	}
}

// register creates or updates the Node and its Lease, retrying until it succeeds (true) or ctx
// ends (false).
func (n *Node) register(ctx context.Context) bool {
	return retryForever(ctx, n.cfg.Clock, "registering the node", func(ctx context.Context) error {
		if err := n.syncNode(ctx); err != nil {
			return err
		}
		return n.renewLease(ctx)
	})
}

// syncNode creates the Node if it is missing (deleted by hand, say), puts the node's labels on
// it and refreshes its status.
func (n *Node) syncNode(ctx context.Context) error {
	nodes := n.client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			node, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.NodeName, Labels: n.labels()}}, metav1.CreateOptions{})
			if err == nil {
				log.FromContext(ctx).Info("Registered the node")
			}
		}
		if err != nil {
			return err
		}
		want := n.labels()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		if !isSubset(want, node.Labels) {
			maps.Copy(node.Labels, want)
			if node, err = nodes.Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		node.Status = n.nodeStatus(node.Status, metav1.NewTime(n.cfg.Clock.Now()))
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func isSubset(sub, m map[string]string) bool {
	for k, v := range sub {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// nodeStatus is what a healthy kubelet reports: host capacity, loopback addresses, system info
// and conditions that say Ready with no pressure; conditions keep their transition times.
func (n *Node) nodeStatus(old corev1.NodeStatus, now metav1.Time) corev1.NodeStatus {
	st := *old.DeepCopy()
	st.Capacity = n.capacity.DeepCopy()
	st.Allocatable = n.capacity.DeepCopy()
	st.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: hostIP},
		{Type: corev1.NodeHostName, Address: n.cfg.NodeName},
	}
	st.NodeInfo = n.info
	// There is no kubelet API here (no logs, exec or port-forward through the API server).
	st.DaemonEndpoints = corev1.NodeDaemonEndpoints{}
	st.Phase = ""
	conds := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}
	for i := range conds {
		conds[i].LastHeartbeatTime, conds[i].LastTransitionTime = now, now
		if j := slices.IndexFunc(old.Conditions, func(c corev1.NodeCondition) bool { return c.Type == conds[i].Type }); j >= 0 && old.Conditions[j].Status == conds[i].Status {
			conds[i].LastTransitionTime = old.Conditions[j].LastTransitionTime
		}
	}
	st.Conditions = conds
	return st
}

// renewLease renews the node's Lease in kube-node-lease, creating it (owned by the Node, so that
// it goes with it) when missing, with the Node if that is missing too.
func (n *Node) renewLease(ctx context.Context) error {
	leases := n.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(n.cfg.Clock.Now())
	lease, err := leases.Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// The Lease goes with its Node: a Node deleted by hand is registered again now
		// rather than at the next status report, minutes away.
		if err := n.syncNode(ctx); err != nil {
			return err
		}
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:            n.cfg.NodeName,
				Namespace:       corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(n.cfg.NodeName),
				LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(n.cfg.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](leaseDurationSeconds)
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the Lease and refreshes the Node until ctx ends.
func (n *Node) heartbeat(ctx context.Context) {
	logger := log.FromContext(ctx)
	lease := n.cfg.Clock.NewTicker(leaseRenewInterval)
	defer lease.Stop()
	status := n.cfg.Clock.NewTicker(nodeStatusInterval)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.C():
			if err := n.renewLease(ctx); err != nil && ctx.Err() == nil {
				logger.Error(err, "Renewing the node lease")
			}
		case <-status.C():
			if err := n.syncNode(ctx); err != nil && ctx.Err() == nil {
				logger.Error(err, "Updating the node status")
			}
		}
	}
}

// hostCapacity is the node's capacity (and allocatable: nothing is reserved, and nothing is
// enforced): the host's CPUs, memory and the space of the file system of DataDir.
func hostCapacity(dataDir string) corev1.ResourceList {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(maxPods, resource.DecimalSI),
	}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil {
		rl[corev1.ResourceMemory] = *resource.NewQuantity(int64(si.Totalram*uint64(si.Unit)), resource.BinarySI)
	}
	var fs syscall.Statfs_t
	if syscall.Statfs(dataDir, &fs) == nil {
		rl[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(fs.Blocks)*fs.Bsize, resource.BinarySI)
	}
	return rl
}

// systemInfo is the host's nodeInfo; facts the host does not expose stay empty.
func systemInfo(kubeletVersion string) corev1.NodeSystemInfo {
	return corev1.NodeSystemInfo{
		MachineID:               readTrimmed("/etc/machine-id"),
		SystemUUID:              readTrimmed("/sys/class/dmi/id/product_uuid"),
		BootID:                  readTrimmed("/proc/sys/kernel/random/boot_id"),
		KernelVersion:           readTrimmed("/proc/sys/kernel/osrelease"),
		OSImage:                 osImage(),
		ContainerRuntimeVersion: containerIDScheme + kubeletVersion,
		KubeletVersion:          kubeletVersion,
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
	}
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// osImage is PRETTY_NAME of os-release, as the kubelet reports it.
func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return v
		}
	}
	return runtime.GOOS
}
