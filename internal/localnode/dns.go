package localnode

import (
	"bufio"
	"context"
	"net"
	"os"
	"strings"
	"time"
)

// A sandbox's DNS: the node answers at egressProxyIP:53 inside each sandbox, over UDP and TCP,
// by relaying each query to the machine's own name servers, as a pod's resolver reaches the
// cluster's DNS (which the chart's networkPolicy.dns opens to every pod). Each sandbox's
// /etc/resolv.conf names that address (sandboxResolvConf). Names resolve; connections still go
// only where the egress proxy lets them.

const (
	sandboxDNSPort = 53
	// dnsTimeout bounds one relayed query, as a resolver's own timeout does.
	dnsTimeout = 5 * time.Second
	// dnsInFlight bounds the queries of one sandbox relayed at once.
	dnsInFlight = 64
	// maxDNSMessage is the largest DNS message over UDP.
	maxDNSMessage = 65535
)

// sandboxResolvConf is the /etc/resolv.conf of every sandbox.
const sandboxResolvConf = "# nbkube: the node's DNS relay inside this pod's sandbox\nnameserver " + egressProxyIP + "\noptions edns0\n"

// machineNameServers are the name servers of the machine's resolv.conf at path, as
// host:port; the local resolver's address when it names none, as glibc assumes.
func machineNameServers(path string) []string {
	var servers []string
	if f, err := os.Open(path); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			if len(fields) >= 2 && fields[0] == "nameserver" {
				if ip := net.ParseIP(strings.Split(fields[1], "%")[0]); ip != nil {
					servers = append(servers, net.JoinHostPort(fields[1], "53"))
				}
			}
		}
	}
	if len(servers) == 0 {
		servers = []string{"127.0.0.1:53"}
	}
	return servers
}

// listenDNS serves the sandbox's DNS relay inside it, to servers.
func (l *sandboxLink) listenDNS(servers []string) error {
	pc, err := l.control.ListenPacket(l.ctx, egressProxyIP, sandboxDNSPort)
	if err != nil {
		return err
	}
	ln, err := l.control.Listen(l.ctx, egressProxyIP, sandboxDNSPort)
	if err != nil {
		pc.Close()
		return err
	}
	if !l.keep(func() { l.dns, l.dnsTCP = pc, ln }) {
		pc.Close()
		ln.Close()
		return nil
	}
	go relayDNS(pc, servers)
	go l.serve(ln, func() (net.Conn, error) {
		var d net.Dialer
		ctx, cancel := context.WithTimeout(l.ctx, dnsTimeout)
		defer cancel()
		var err error
		for _, s := range servers {
			var c net.Conn
			if c, err = d.DialContext(ctx, "tcp", s); err == nil {
				return c, nil
			}
		}
		return nil, err
	})
	return nil
}

// relayDNS answers each query that reaches pc with the first answer of servers, until pc is
// closed. A query no server answers in time gets none, and its resolver tries again.
func relayDNS(pc net.PacketConn, servers []string) {
	slots := make(chan struct{}, dnsInFlight)
	for {
		buf := make([]byte, maxDNSMessage)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			continue // too many at once: dropped, as a busy server drops them
		}
		go func() {
			defer func() { <-slots }()
			if answer := askDNS(buf[:n], servers); answer != nil {
				_, _ = pc.WriteTo(answer, from)
			}
		}()
	}
}

// askDNS sends query to each of servers in turn until one answers.
func askDNS(query []byte, servers []string) []byte {
	for _, s := range servers {
		c, err := net.Dial("udp", s)
		if err != nil {
			continue
		}
		_ = c.SetDeadline(time.Now().Add(dnsTimeout / time.Duration(len(servers))))
		answer := make([]byte, maxDNSMessage)
		var n int
		if _, err = c.Write(query); err == nil {
			n, err = c.Read(answer)
		}
		c.Close()
		if err == nil {
			return answer[:n]
		}
	}
	return nil
}
