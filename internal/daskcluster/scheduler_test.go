package daskcluster_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/daskcluster"
	"github.com/nbkube/nbkube/internal/testenv"
)

// daskCluster is a real dask-scheduler (Debian's python3-distributed) with TLS from
// NewCredentials and nbkube's HTTP routes under a prefix, as the builder runs it, and its
// workers.
type daskCluster struct {
	t       *testing.T
	dir     string
	ip      string
	address string // tls://ip:port
	base    string // http://ip:port/prefix
	env     []string
}

func startDask(t *testing.T) *daskCluster {
	t.Helper()
	if _, err := exec.LookPath("dask-scheduler"); err != nil {
		testenv.Missing(t, "dask-scheduler is not installed (Debian python3-distributed): %v", err)
	}
	creds, err := daskcluster.NewCredentials(rand.Reader, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"ca.crt": creds.CA, "tls.crt": creds.Cert, "tls.key": creds.Key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := &daskCluster{t: t, dir: dir, ip: "127.0.0.1"}
	port, httpPort := freePort(t), freePort(t)
	d.address = fmt.Sprintf("tls://%s:%d", d.ip, port)
	d.base = fmt.Sprintf("http://%s:%d/dask/test", d.ip, httpPort)
	d.env = append(os.Environ(), "HOME="+dir, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True")
	d.start("scheduler", "dask-scheduler", "--protocol=tls", "--host="+d.ip, "--port="+strconv.Itoa(port),
		fmt.Sprintf("--dashboard-address=%s:%d", d.ip, httpPort), "--dashboard-prefix=/dask/test",
		"--tls-ca-file="+filepath.Join(dir, "ca.crt"), "--tls-cert="+filepath.Join(dir, "tls.crt"), "--tls-key="+filepath.Join(dir, "tls.key"))
	return d
}

func (d *daskCluster) start(name string, argv ...string) *exec.Cmd {
	d.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = d.dir
	cmd.Env = append(d.env, "DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES="+daskcluster.HTTPRoutes)
	log, err := os.Create(filepath.Join(d.dir, name+".log"))
	if err != nil {
		d.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if d.t.Failed() {
			b, _ := os.ReadFile(log.Name())
			d.t.Logf("%s log:\n%s", name, b)
		}
	})
	return cmd
}

func (d *daskCluster) worker(name string) *exec.Cmd {
	return d.start(name, "dask-worker", d.address, "--name="+name, "--no-nanny", "--protocol=tls", "--host="+d.ip,
		"--nthreads=1", "--dashboard-address="+d.ip+":0", "--local-directory="+d.dir, "--death-timeout=60",
		"--tls-ca-file="+filepath.Join(d.dir, "ca.crt"), "--tls-cert="+filepath.Join(d.dir, "tls.crt"), "--tls-key="+filepath.Join(d.dir, "tls.key"))
}

// clientEnv is Dask's client settings as a kernel attached to the cluster gets them
// (builder.DaskSecret).
func (d *daskCluster) clientEnv(extra ...string) []string {
	return append(append(os.Environ(),
		"HOME="+d.dir,
		"DASK_SCHEDULER_ADDRESS="+d.address,
		"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True",
		"DASK_DISTRIBUTED__COMM__TLS__CA_FILE="+filepath.Join(d.dir, "ca.crt"),
		"DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT="+filepath.Join(d.dir, "tls.crt"),
		"DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY="+filepath.Join(d.dir, "tls.key"),
	), extra...)
}

// client runs Python as a kernel attached to the cluster would, and returns its output.
func (d *daskCluster) client(code string, extraEnv ...string) (string, error) {
	cmd := exec.Command("/usr/bin/python3", "-c", code)
	cmd.Env = d.clientEnv(extraEnv...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitWorkers polls Query until the scheduler has n workers.
func waitWorkers(t *testing.T, c daskcluster.Client, base string, n int) daskcluster.Status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), daskcluster.RetireTimeout)
		st, err := c.Query(ctx, base)
		cancel()
		if err == nil && len(st.Workers) == n {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler did not have %d workers in 60 s: %+v, %v", n, st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestScheduler_RealDask(t *testing.T) {
	d := startDask(t)
	d.worker("w1")
	w2 := d.worker("w2")
	c := daskcluster.Client{}
	st := waitWorkers(t, c, d.base, 2)
	if st.Workers[0].Name != "w1" || st.Workers[1].Name != "w2" || !strings.HasPrefix(st.Workers[0].Address, "tls://") {
		t.Fatalf("workers = %+v, want w1 and w2 at tls:// addresses", st.Workers)
	}

	t.Run("a client with the cluster's certificate maps over both workers", func(t *testing.T) {
		out, err := d.client(`
from dask.distributed import Client, get_worker
c = Client(timeout=30)
print(sorted(set(c.gather(c.map(lambda i: get_worker().name, range(40), pure=False)))))`)
		if err != nil || !strings.HasSuffix(out, "['w1', 'w2']") {
			t.Fatalf("client: %v\n%s", err, out)
		}
	})

	t.Run("a client without the certificate is refused", func(t *testing.T) {
		// Its own CA and certificate: TLS, but not the cluster's.
		other, err := daskcluster.NewCredentials(rand.Reader, "other", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for name, b := range map[string][]byte{"ca.crt": other.CA, "tls.crt": other.Cert, "tls.key": other.Key} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, err := d.client(`
from dask.distributed import Client
try:
    Client(timeout=5)
    print("connected")
except Exception as e:
    print("refused:", type(e).__name__)`,
			"DASK_DISTRIBUTED__COMM__TLS__CA_FILE="+filepath.Join(dir, "ca.crt"),
			"DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT="+filepath.Join(dir, "tls.crt"),
			"DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY="+filepath.Join(dir, "tls.key"))
		if err != nil || !strings.Contains(out, "refused:") {
			t.Fatalf("a foreign certificate: %v\n%s", err, out)
		}
	})

	t.Run("busy workers and tasks show", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := d.client(`
import time
from dask.distributed import Client
c = Client(timeout=30)
c.gather(c.map(lambda i: time.sleep(4), range(2), pure=False))`)
			done <- err
		}()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, err := c.Query(context.Background(), d.base)
			busy := 0
			for _, w := range st.Workers {
				if w.Executing > 0 {
					busy++
				}
			}
			if err == nil && busy == 2 && st.Processing == 2 && st.Tasks >= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("never saw both workers busy: %+v, %v", st, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("retiring a worker keeps the results it held", func(t *testing.T) {
		// The client computes results spread over both workers, holds them, and waits; w2 is
		// retired through the scheduler and its process killed; the client then reads every
		// result, none computed again.
		cmd := exec.Command("/usr/bin/python3", "-c", `
import sys
from dask.distributed import Client, wait
c = Client(timeout=30)
fs = c.map(lambda i: i * i, range(40), pure=False)
wait(fs)
w2 = [a for a, w in c.scheduler_info()["workers"].items() if w["name"] == "w2"][0]
on_w2 = sum(1 for ws in c.who_has(fs).values() if w2 in ws)
print(w2, on_w2, flush=True)
sys.stdin.readline()
elsewhere = sum(1 for ws in c.who_has(fs).values() if ws and w2 not in ws)
print(elsewhere, sum(c.gather(fs)), sorted(w["name"] for w in c.scheduler_info()["workers"].values()), flush=True)`)
		cmd.Env = d.clientEnv()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		var addr string
		var held int
		if _, err := fmt.Fscan(stdout, &addr, &held); err != nil || held == 0 {
			_ = cmd.Wait()
			t.Fatalf("the client did not hold results on w2 (%q, %d): %v\n%s", addr, held, err, out.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), daskcluster.RetireTimeout)
		defer cancel()
		if err := c.Retire(ctx, d.base, []string{addr}); err != nil {
			t.Fatal(err)
		}
		if st, err := c.Query(ctx, d.base); err != nil || len(st.Workers) != 1 || st.Workers[0].Name != "w1" {
			t.Fatalf("after the retirement the scheduler has %+v, %v: want w1 alone", st.Workers, err)
		}
		_ = syscall.Kill(-w2.Process.Pid, syscall.SIGKILL)
		if _, err := stdin.Write([]byte("\n")); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(stdout)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("client: %v\n%s", err, out.String())
		}
		// Every result is on w1 before the client reads it (none lost with w2, so none computed
		// again), and the sum of i*i for i < 40 is 20540.
		if got := strings.TrimSpace(string(rest)); got != "40 20540 ['w1']" {
			t.Fatalf("after the retirement the client read %q, want all 40 results held by w1, summing to 20540\n%s", got, out.String())
		}
	})

	t.Run("the adaptive target", func(t *testing.T) {
		n, err := c.AdaptiveTarget(context.Background(), d.base)
		// One worker holds the client's results, no task waits.
		if err != nil || n < 0 || n > 1 {
			t.Fatalf("adaptive target = %d, %v", n, err)
		}
	})
}
