package daskcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"time"
)

// Credentials are a cluster's own TLS files. Dask's TLS is mutual: the scheduler, each worker
// and each client present a certificate and accept only peers whose certificate the CA in
// ca-file signed (distributed/security.py: CERT_REQUIRED, no host name check, "we expect a
// dedicated CA for the cluster"). Each cluster gets its own CA, whose key is thrown away once
// it has signed the one certificate that the scheduler, the workers and the owner's kernels
// share: whoever has that certificate is of the cluster, and nobody can sign another.
type Credentials struct {
	CA, Cert, Key []byte // PEM
}

// certValidity is how long a cluster's certificates hold; a cluster lives as long as its
// Cluster resource, and a new Secret (a cluster made again) gets new ones.
const certValidity = 10 * 365 * 24 * time.Hour

// NewCredentials makes a cluster's CA and the certificate it signs, named after the cluster.
func NewCredentials(random io.Reader, cluster string, now time.Time) (Credentials, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return Credentials{}, fmt.Errorf("dask CA key: %w", err)
	}
	serial := func() (*big.Int, error) {
		return randInt(random)
	}
	caSerial, err := serial()
	if err != nil {
		return Credentials{}, err
	}
	notBefore := now.Add(-time.Hour)
	caTemplate := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: "nbkube dask cluster " + cluster + " CA"},
		NotBefore:             notBefore,
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(random, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return Credentials{}, fmt.Errorf("dask CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Credentials{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return Credentials{}, fmt.Errorf("dask key: %w", err)
	}
	leafSerial, err := serial()
	if err != nil {
		return Credentials{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: leafSerial,
		Subject:      pkix.Name{CommonName: "nbkube dask cluster " + cluster},
		NotBefore:    notBefore,
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(random, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Credentials{}, fmt.Errorf("dask certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func randInt(random io.Reader) (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := io.ReadFull(random, b); err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return new(big.Int).SetBytes(b), nil
}
