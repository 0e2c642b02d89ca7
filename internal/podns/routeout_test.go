package podns

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A sandbox with a route out has eth0 with its address and the default route before its
// command runs, and what it sends anywhere but its loopback comes out of the TUN device
// that Control.RouteOut hands over, as IP packets from its address.
func TestSandbox_RouteOutCarriesWhatItSendsOut(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("the machine has no /dev/net/tun: sandboxes get no route out here")
	}
	if unix.Access("/dev/net/tun", unix.R_OK|unix.W_OK) != nil && !hostMakesRouteOut() {
		t.Skip("this user may not open /dev/net/tun: sandboxes get no route out here")
	}
	spec := Spec{Path: "/usr/bin/python3", Argv: []string{"python3", "-c", `
import socket, time
for line in open("/proc/net/route").read().splitlines()[1:]:
    f = line.split()
    if f[1] == "00000000":
        print("default=" + f[0], flush=True)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(100):
    u.sendto(b"hello", ("192.0.2.7", 5353))
    time.sleep(0.1)
`}, Env: []string{"PATH=/usr/bin:/bin"}, UID: 1000, GID: 1000,
		RouteOut: &RouteOut{Device: "/dev/net/tun", Address: "10.0.2.100"}}
	s := start(t, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tun, err := s.control.RouteOut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := tun.Read(buf)
			if err != nil {
				got <- "read: " + err.Error()
				return
			}
			p := buf[:n]
			if len(p) < 28 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_UDP {
				continue
			}
			ihl := int(p[0]&0xf) * 4
			got <- fmt.Sprintf("%s > %s:%d %q", net.IP(p[12:16]), net.IP(p[16:20]), binary.BigEndian.Uint16(p[ihl+2:]), p[ihl+8:])
			return
		}
	}()
	select {
	case g := <-got:
		if want := `10.0.2.100 > 192.0.2.7:5353 "hello"`; g != want {
			t.Errorf("out of the TUN device: %s, want %s", g, want)
		}
	case <-ctx.Done():
		t.Fatal("no datagram came out of the route out")
	}
	_ = s.cmd.Process().Kill()
	if _, out := s.wait(t); results(out)["default"] != "eth0" {
		t.Errorf("the sandbox's default route: %q", out)
	}

	// Without one, there is none to ask for.
	plain := start(t, shell("sleep 30"))
	if _, err := plain.control.RouteOut(ctx); err == nil {
		t.Error("a sandbox without a route out handed one over")
	}
}
