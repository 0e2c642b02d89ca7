package podns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RouteOut gives a sandbox a way out of its network namespace for every protocol, as a
// pod's network interface is: a TUN interface, eth0, with Address and the default route, so
// that what the sandbox sends anywhere but its own loopback comes out of the TUN device as IP
// packets. Control.RouteOut hands the device to the node, which answers them (a user-space
// network stack that connects from the host where the pod's policies allow). Nothing inside
// can change the interface or its routes: the command has no capability.
type RouteOut struct {
	// Device is the TUN clone device the init opens before it builds the root: /dev/net/tun,
	// or a node of it that root made for this sandbox's user of the machine (a sandbox of a
	// user of its own cannot open root's /dev/net/tun, mode 0600 on some machines).
	Device string `json:"device"`
	// Address is the sandbox's IPv4 address on eth0, the source of what it sends out.
	Address string `json:"address"`
	// MTU of eth0; 1500 when 0.
	MTU int `json:"mtu,omitempty"`
}

// routeOutName is the TUN interface's name inside the sandbox, a pod's usual one.
const routeOutName = "eth0"

// Who makes the route out: the init, in its own namespaces, when an ordinary user starts
// sandboxes (it then needs a /dev/net/tun that user may open, as Debian's udev makes it);
// root's node itself, from a thread that joins the sandbox's network namespace before the
// init starts the command, since a sandbox of a user of its own cannot open root's
// /dev/net/tun (0600 on some machines), and the device is made in the namespace of the
// process that opens it.
func hostMakesRouteOut() bool { return os.Geteuid() == 0 }

// makeRouteOut makes eth0 in the init's network namespace and returns its TUN device, which
// the init keeps (close-on-exec) for Control.RouteOut.
func makeRouteOut(r *RouteOut) (*os.File, error) {
	f, err := openTUN()
	if err != nil {
		return nil, err
	}
	h, err := netlink.NewHandle()
	if err == nil {
		defer h.Close()
		err = configureRouteOut(h, r)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// makeRouteOutOf makes eth0 in the network namespace of process pid, the init of a sandbox
// that has not started its command yet, from outside; root only.
func makeRouteOutOf(pid int, r *RouteOut) (*os.File, error) {
	target, err := netns.GetFromPid(pid)
	if err != nil {
		return nil, fmt.Errorf("the sandbox's network namespace: %w", err)
	}
	defer func() { _ = target.Close() }()
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		// The thread joins the sandbox's namespace to open the device there, and comes back
		// before it is given back to the scheduler. It must not end: a process started
		// with Pdeathsig by whatever goroutine ran on it before would be killed.
		runtime.LockOSThread()
		home, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- opened{err: fmt.Errorf("this thread's network namespace: %w", err)}
			return
		}
		defer func() { _ = home.Close() }()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			ch <- opened{err: fmt.Errorf("joining the sandbox's network namespace: %w", err)}
			return
		}
		f, err := openTUN()
		if rerr := netns.Set(home); rerr != nil {
			// Stuck in the sandbox's namespace: the thread ends with the goroutine, locked.
			if f != nil {
				f.Close()
			}
			ch <- opened{err: fmt.Errorf("leaving the sandbox's network namespace: %w", rerr)}
			return
		}
		runtime.UnlockOSThread()
		ch <- opened{f, err}
	}()
	o := <-ch
	if o.err != nil {
		return nil, o.err
	}
	h, err := netlink.NewHandleAt(target)
	if err == nil {
		defer h.Close()
		err = configureRouteOut(h, r)
	}
	if err != nil {
		o.f.Close()
		return nil, err
	}
	return o.f, nil
}

// openTUN makes the TUN interface in the calling thread's network namespace.
func openTUN() (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /dev/net/tun: %w", err)
	}
	f := os.NewFile(uintptr(fd), "tun")
	ifr, err := unix.NewIfreq(routeOutName)
	if err == nil {
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("making the TUN interface: %w", err)
	}
	return f, nil
}

func configureRouteOut(h *netlink.Handle, r *RouteOut) error {
	addr := net.ParseIP(r.Address).To4()
	if addr == nil {
		return fmt.Errorf("the route out's address %q is not IPv4", r.Address)
	}
	link, err := h.LinkByName(routeOutName)
	if err != nil {
		return fmt.Errorf("finding %s: %w", routeOutName, err)
	}
	mtu := r.MTU
	if mtu == 0 {
		mtu = 1500
	}
	if err := h.LinkSetMTU(link, mtu); err != nil {
		return fmt.Errorf("setting %s's MTU: %w", routeOutName, err)
	}
	if err := h.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: addr, Mask: net.CIDRMask(32, 32)}}); err != nil {
		return fmt.Errorf("giving %s its address: %w", routeOutName, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing %s up: %w", routeOutName, err)
	}
	// The default route, on the link: a TUN interface has no neighbours to resolve.
	if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Scope: netlink.SCOPE_LINK,
		Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}}); err != nil {
		return fmt.Errorf("routing through %s: %w", routeOutName, err)
	}
	return nil
}

// errNoRouteOut is RouteOut's answer for a sandbox without one.
var errNoRouteOut = errors.New("the sandbox has no route out")

// RouteOut is the TUN device of the sandbox's eth0 (Spec.RouteOut): the packets it reads
// are what the sandbox sends out, and what is written to it reaches the sandbox. An error
// when the sandbox has none (not asked for, or the machine would not make one).
func (c *Control) RouteOut(ctx context.Context) (*os.File, error) {
	switch {
	case c.routeOut != nil:
		// Made by root's node: a copy, as the init's answer would be.
		return dupFile(c.routeOut)
	case c.routeOutErr != nil:
		return nil, c.routeOutErr
	}
	return c.ask(ctx, dialRequest{RouteOut: true})
}

func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}
