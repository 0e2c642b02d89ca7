// Package podns runs a container's process the way a container runtime would, with Linux
// namespaces and without privileges, so that the pods of the local node are as separate from
// each other and from nbkube as pods on a real node.
//
// A process started by Command is re-executed from this very binary as a small init (see
// RunInitIfAsked) inside new user, mount, PID, network, IPC and UTS namespaces, made with
// clone(2) as an ordinary user may, by the caller or by a Spawner (spawner.go), a small
// process of that program that forks in the caller's place, since the process that makes a
// user namespace is copied whole: the user namespace maps one user and one group inside (the
// container's runAsUser and runAsGroup) to nbkube's own, so files the container writes on its
// volumes belong to nbkube's user, and nothing inside holds a capability of the machine. Root
// may give each sandbox a user of the machine of its own instead (Spec.Host, hostids.go); its
// volumes are then idmapped mounts that show root's files as the sandbox's user's. The
// init, PID 1 of the new PID namespace, builds the container's file system and starts the
// container's command as its child:
//
//   - the root is an empty tmpfs, read-only once built; the system's directories (/usr, /etc,
//     /bin, /lib...) appear read-only at their own paths, with secrets of the machine
//     (/etc/shadow, SSH host keys...) masked;
//   - each volume appears at its mount path, read-only where the mount says so; nothing else of
//     the host, so never nbkube's data directory, the contents root, other pods' directories or
//     the home of the user running nbkube;
//   - a /proc of the new PID namespace (no other process of the machine can be seen or
//     signalled), a /dev with the usual character devices, its own pseudo-terminals and /dev/shm,
//     a private /tmp unless a volume is mounted there;
//   - a network namespace with only a loopback interface: the pod cannot connect to other pods,
//     to nbkube's or the control plane's ports, or elsewhere. Connections to the ports the pod
//     declares come in through Control.Dial, which asks the init to dial inside and hands back
//     the connected socket, so the node can forward its pod IP's ports to the pod.
//
// Before it starts the command the init empties the capability bounding set and sets
// no_new_privs on every thread, so that the command and its children have no capability even
// in their own user namespace (not even as UID 0 there) and cannot gain one through exec. The
// init forwards the signals it gets to the command's process group, reaps orphans as PID 1 must,
// and exits with the command's status (128+N for death by signal N); when it exits, the kernel
// kills what is left in its PID namespace.
//
// What is left out: run by an ordinary user, every pod is that user on the machine (a user per
// pod needs root), there are no cgroup limits, and containers of one pod do not
// share a network namespace (each container gets its own; nbkube's pods have one container).
package podns
