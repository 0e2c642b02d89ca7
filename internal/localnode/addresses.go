package localnode

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// reservedAddresses are loopback addresses that other software on a typical Linux host already
// serves: Debian's /etc/hosts maps the hostname to 127.0.1.1, and systemd-resolved listens on
// 127.0.0.53 and 127.0.0.54. Inside every sandbox the egress proxy listens at egressProxyIP.
var reservedAddresses = map[netip.Addr]bool{
	netip.MustParseAddr(egressProxyIP): true,
	netip.MustParseAddr("127.0.1.1"):   true,
	netip.MustParseAddr("127.0.0.53"):  true,
	netip.MustParseAddr("127.0.0.54"):  true,
}

// addressPool hands out pod IPs from 127.0.0.0/8, from 127.0.0.2 upward. An address is held by an
// exclusive flock on a file named after it in a directory shared by every nbkube on the machine,
// so that two nodes (make run beside go test, or test packages in parallel) never give pods the
// same address; the kernel drops the lock when a process dies, so a crash leaks nothing.
type addressPool struct {
	dir string

	mu   sync.Mutex
	held map[netip.Addr]*os.File
}

func newAddressPool(dir string) *addressPool {
	return &addressPool{dir: dir, held: map[netip.Addr]*os.File{}}
}

// allocate reserves the lowest free address.
func (p *addressPool) allocate() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.MkdirAll(p.dir, 0o777); err != nil {
		return "", fmt.Errorf("creating the address lock directory: %w", err)
	}
	last := netip.MustParseAddr("127.255.255.254")
	for a := netip.MustParseAddr("127.0.0.2"); a.Less(last); a = a.Next() {
		b := a.As4()
		if b[3] == 0 || b[3] == 255 || reservedAddresses[a] || p.held[a] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(p.dir, a.String()), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return "", fmt.Errorf("opening the lock of %s: %w", a, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			return "", fmt.Errorf("locking %s: %w", a, err)
		}
		p.held[a] = f
		return a.String(), nil
	}
	return "", errors.New("no free loopback address left for a pod")
}

// release frees an address allocate returned; releasing one not held is a no-op.
func (p *addressPool) release(addr string) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.held[a]; f != nil {
		// Closing the file drops the lock. The file stays: removing it would race with another
		// process that opened it and is about to lock it.
		f.Close()
		delete(p.held, a)
	}
}
