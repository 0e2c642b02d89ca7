package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The control plane's own PKI: one CA that signs the serving certificates of etcd and
// kube-apiserver and the client certificates of everything that talks to them, so that
// nothing on the machine but the holder of the data directory can reach the cluster.
// Files are created once and reused, which keeps kubeconfigs and tokens valid across restarts.

const certValidity = 10 * 365 * 24 * time.Hour

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

type certRequest struct {
	name         string // file base name under pki/
	commonName   string
	organization []string
	ips          []net.IP
	dnsNames     []string
	usages       []x509.ExtKeyUsage
}

// ensurePKI makes (or loads) the CA and every certificate the control plane uses.
func ensurePKI(dir string) (*keyPair, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := loadKeyPair(dir, "ca")
	if errors.Is(err, os.ErrNotExist) {
		ca, err = newCA(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("certificate authority: %w", err)
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	requests := []certRequest{
		{name: "etcd-server", commonName: "etcd", ips: loopback, dnsNames: []string{"localhost"},
			usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{name: "apiserver-etcd-client", commonName: "kube-apiserver-etcd-client", usages: client},
		{name: "apiserver", commonName: "kube-apiserver", usages: server,
			ips: append([]net.IP{net.ParseIP(serviceIP)}, loopback...),
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"}},
		{name: "admin", commonName: "nbkube-admin", organization: []string{"system:masters"}, usages: client},
		{name: "controller-manager", commonName: "system:kube-controller-manager", usages: client},
	}
	for _, r := range requests {
		if _, err := loadKeyPair(dir, r.name); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("certificate %s: %w", r.name, err)
		}
		if err := issue(dir, ca, r); err != nil {
			return nil, fmt.Errorf("certificate %s: %w", r.name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sa.key")); errors.Is(err, os.ErrNotExist) {
		if err := newServiceAccountKey(dir); err != nil {
			return nil, fmt.Errorf("service account key: %w", err)
		}
	} else if err != nil {
		return nil, err
	}
	return ca, nil
}

func newCA(dir string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "nbkube-local-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	if err := writeKeyPair(dir, "ca", der, key); err != nil {
		return nil, err
	}
	return loadKeyPair(dir, "ca")
}

func issue(dir string, ca *keyPair, r certRequest) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: r.commonName, Organization: r.organization},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  r.usages,
		IPAddresses:  r.ips,
		DNSNames:     r.dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return err
	}
	return writeKeyPair(dir, r.name, der, key)
}

// newServiceAccountKey writes the RSA key pair that signs service account tokens (RSA because
// every consumer of the tokens' JWKS accepts it).
func newServiceAccountKey(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, "sa.pub"),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, "sa.key"),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}

func writeKeyPair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	// The key first: a certificate without its key would be taken as complete by loadKeyPair.
	if err := writeFileAtomic(filepath.Join(dir, name+".key"),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, name+".crt"),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func loadKeyPair(dir, name string) (*keyPair, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("%s: not PEM", name)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on Linux; a broken entropy source must not go unnoticed.
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return n
}

// writeFileAtomic writes data readable by the owner only, so that a crash leaves either the
// old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
