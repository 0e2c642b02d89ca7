package localnode_test

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/testenv"
)

// dnsTestIP is what the test's name server answers for every name.
const dnsTestIP = "192.0.2.7"

// startNameServer serves DNS on a UDP port of the machine as its resolver would, answering
// every A question with dnsTestIP and others with no answer; it returns its address.
func startNameServer(t *testing.T) string {
	t.Helper()
	return servePackets(t, "127.0.0.1:0", answerQuery).LocalAddr().String()
}

// answerQuery is the answer to one question: the header with the query's id, the question
// copied, and an A record for it when it asks for one.
func answerQuery(q []byte) []byte {
	if len(q) < 12 {
		return nil
	}
	end := 12
	for end < len(q) && q[end] != 0 {
		end += int(q[end]) + 1
	}
	end += 5 // the root label, type and class
	if end > len(q) {
		return nil
	}
	isA := binary.BigEndian.Uint16(q[end-4:end-2]) == 1
	out := append([]byte{}, q[:2]...)
	out = append(out, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0)
	if isA {
		out[7] = 1
	}
	out = append(out, q[12:end]...)
	if isA {
		out = append(out, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
		out = append(out, net.ParseIP(dnsTestIP).To4()...)
	}
	return out
}

// namesResolveThroughTheNodesDNS: a sandbox resolves a name with the system's resolver, which
// its /etc/resolv.conf points at the node's relay inside it.
func namesResolveThroughTheNodesDNS(t *testing.T, client kubernetes.Interface) {
	ns := newNamespace(t, client)
	out := t.TempDir()
	pod := basicPod(ns, "resolver", corev1.RestartPolicyNever, "python3", "-c",
		`import os, socket; ip = socket.gethostbyname("pypi.nbkube-test.example"); open("/out/ip.new", "w").write(ip); os.rename("/out/ip.new", "/out/ip")`)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
	pod.Spec.Volumes = []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	createPod(t, client, pod)
	testenv.Eventually(t, "the pod's answer", 60*time.Second, func() error {
		b, err := os.ReadFile(filepath.Join(out, "ip"))
		if err == nil && strings.TrimSpace(string(b)) != dnsTestIP {
			t.Fatalf("the name resolved to %q, want %s", b, dnsTestIP)
		}
		return err
	})
}
