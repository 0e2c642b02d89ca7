// Package localnode is a one-node stand-in for kube-scheduler and the kubelet that runs each
// pod's containers as processes on the host. It is what `make run` and the local end-to-end
// tests put beside a real kube-apiserver and kube-controller-manager, so that the controllers and
// pod specs are exactly those of a real cluster and only the node differs.
//
// A Node registers a Node object and keeps its Lease renewed, binds the unscheduled pods whose
// node selector and required node affinity match it, and runs every pod bound to it: volumes
// become directories under Config.DataDir, each pod gets its own loopback address (127.0.0.N) as
// its pod IP, and absolute paths in a container's command, args, env and workingDir that fall
// under a volume mount are rewritten to the host directory behind the mount.
//
// What a real node enforces and this one does not: images (a container must name its command,
// which runs from the host), resource requests and limits (there are no cgroups; limits only feed
// the downward API), and lifecycle hooks. Without Config.Sandbox it does not enforce
// securityContext (every process runs as the nbkube user), read-only mounts or network isolation
// (pods share the host's network namespace; the pod IP is an address to bind to, and a server
// bound to 0.0.0.0 is reachable on every pod IP). With it, each container runs in namespaces of
// its own (internal/podns; isolation.go), its user and read-only mounts hold inside, and the node
// carries the connections between pods that the NetworkPolicies allow (podnet.go, netpolicy.go).
// It needs Linux: there the whole of 127.0.0.0/8 reaches lo, and Pdeathsig ties each container
// process's life to nbkube's.
//
// Each container process leads its own process group, which is signalled as a whole when the
// container stops and killed when its leader exits, as a container's processes die with its
// init. If nbkube itself is killed with SIGKILL, the container processes die with it, but the
// processes they started survive unless they set Pdeathsig on them too.
package localnode
