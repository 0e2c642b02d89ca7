package apiserver

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// trustedProxies are the addresses of TLS-terminating proxies (an Ingress controller) whose
// X-Forwarded-Proto is believed.
type trustedProxies []netip.Prefix

// viaHTTPS reports whether the browser's request came over HTTPS: to nbkube's own TLS, or to a
// trusted proxy that says so in X-Forwarded-Proto. Cookies are Secure then, and addresses
// handed to browsers and providers are https (and wss). A proxy not in the list cannot make a
// plain request look secure.
func (t trustedProxies) viaHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if len(t) == 0 || !t.contain(r.RemoteAddr) {
		return false
	}
	// The nearest proxy's value is the first one it set: the left-most is the client's side.
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

func (t trustedProxies) contain(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range t {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// viaHTTPS reports whether r came over HTTPS, to nbkube or to a trusted proxy.
func (s *Server) viaHTTPS(r *http.Request) bool { return s.auth.proxies.viaHTTPS(r) }
