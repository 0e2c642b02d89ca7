package localnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/elazarl/goproxy"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// One of a sandbox's ways out of its network namespace is an HTTP proxy that the node serves
// inside it, at an address no pod gets: the proxy connects, from the host, only where the
// pod's egress NetworkPolicies let it, as a network that enforces them would. The environment
// of every sandboxed container names it (HTTP_PROXY, HTTPS_PROXY and their lower-case forms),
// which pip, git, curl, conda, requests and urllib follow; the names it is asked for are
// resolved by the node (the sandbox's own DNS, dns.go, only answers names). The other way out,
// for every TCP and UDP client, is the sandbox's eth0 (routeout.go), where the machine allows
// one.
const (
	egressProxyIP   = "127.0.0.100"
	egressProxyPort = 3128
)

// egressProxyURL is what the proxy variables of a sandboxed container say.
var egressProxyURL = "http://" + net.JoinHostPort(egressProxyIP, strconv.Itoa(egressProxyPort))

// egressNoProxy is the sandbox's own loopback, which its processes reach directly.
const egressNoProxy = "localhost,127.0.0.1,::1"

// errEgressRefused is the proxy's answer to a destination the pod may not reach.
var errEgressRefused = errors.New("the pod's network policies do not allow a connection there")

// egressDialTimeout bounds one connection the proxy makes.
const egressDialTimeout = 30 * time.Second

// listenEgress serves the egress proxy inside the sandbox.
func (l *sandboxLink) listenEgress(n *podNetwork) error {
	ln, err := l.control.Listen(l.ctx, egressProxyIP, egressProxyPort)
	if err != nil {
		return fmt.Errorf("serving the egress proxy: %w", err)
	}
	if !l.keep(func() { l.egress = ln }) {
		ln.Close()
		return nil
	}
	dial := func(ctx context.Context, _, addr string) (net.Conn, error) { return n.dialOut(ctx, l, addr) }
	proxy := goproxy.NewProxyHttpServer()
	proxy.Logger = proxyLogger{l}
	proxy.Tr = &http.Transport{DialContext: dial, ForceAttemptHTTP2: true, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second}
	proxy.ConnectDialWithReq = func(req *http.Request, network, addr string) (net.Conn, error) {
		return dial(req.Context(), network, addr)
	}
	proxy.ConnectionErrHandler = func(w io.Writer, _ *goproxy.ProxyCtx, err error) {
		status, msg := egressRefusal(err)
		fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			status, http.StatusText(status), len(msg), msg)
	}
	proxy.OnResponse().DoFunc(func(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
		if resp == nil && ctx.Error != nil {
			status, msg := egressRefusal(ctx.Error)
			return goproxy.NewResponse(ctx.Req, goproxy.ContentTypeText, status, msg)
		}
		return resp
	})
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// egressRefusal is the status and text the proxy answers a failed connection with.
func egressRefusal(err error) (int, string) {
	if errors.Is(err, errEgressRefused) {
		return http.StatusForbidden, err.Error() + "\n"
	}
	return http.StatusBadGateway, err.Error() + "\n"
}

// dialOut connects the pod of link l to addr if its egress policies allow one of the
// addresses addr resolves to, and connects to that address: the name is resolved once, so
// what is checked is what is dialled. The node's loopback, where the control plane, nbkube's
// servers and the pod IPs are, is reached only at the other pods' addresses the pod network
// routes this pod to.
func (n *podNetwork) dialOut(ctx context.Context, l *sandboxLink, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("bad port in %q", addr)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", strings.Trim(host, "[]"))
	if err != nil {
		return nil, err
	}
	view, err := n.view()
	if err != nil {
		return nil, err
	}
	src := endpointPod{pod: l.pod, ip: l.ip}
	d := net.Dialer{Timeout: egressDialTimeout}
	lastErr := fmt.Errorf("%w: %s", errEgressRefused, addr)
	for _, ip := range ips {
		ip = ip.Unmap()
		target := net.JoinHostPort(ip.String(), portText)
		if ip.IsLoopback() || ip.IsUnspecified() {
			if !l.routes(target) {
				continue
			}
		} else if !view.allowsOut(src, ip, corev1.ProtocolTCP, int32(port)) {
			continue
		}
		c, err := d.DialContext(ctx, "tcp", target)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// allowsOut tells whether src may reach port (of protocol proto) of ip, an address outside
// the pod network, as its egress policies decide (ipBlock rules, or rules with no peers).
func (v policyView) allowsOut(src endpointPod, ip netip.Addr, proto corev1.Protocol, port int32) bool {
	return v.admits(networkingv1.PolicyTypeEgress, src, endpointPod{ip: ip.String()}, proto, port)
}

// routes tells whether the pod network carries this link's connections to addr, another
// pod's address and port.
func (l *sandboxLink) routes(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.out[addr]
	return ok
}

// proxyLogger puts what goproxy says in the node's log, at debug level.
type proxyLogger struct{ l *sandboxLink }

func (p proxyLogger) Printf(format string, v ...any) {
	p.l.log.V(2).Info("Egress proxy", "message", fmt.Sprintf(format, v...))
}
