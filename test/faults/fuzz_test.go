//go:build faults

package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/wire"
)

// The fuzz targets of this file run their seeds in every `go test`; run one for longer with
//
//	go test ./test/faults/ -run '^$' -fuzz=FuzzAPI -fuzztime=5000x
//	go test ./test/faults/ -run '^$' -fuzz=FuzzClientFrame -fuzztime=20s

const (
	// fuzzMaxBody is the fuzzed server's --max-body-size.
	fuzzMaxBody = 1 << 20
	// requestAllocBound bounds what one request may allocate in the whole process: its body
	// is at most fuzzMaxBody, and the models of the little the fuzzer can write stay small.
	// A request that allocates more from so small an input is a memory bug.
	requestAllocBound = 64 << 20
)

// fuzzServer is the API server the HTTP fuzzer sends to: a real net/http server on a
// loopback port, over a contents store in a temporary directory, with token authentication,
// and no kernels (a Kubernetes API is not what is fuzzed here).
type fuzzServer struct {
	addr string
	// dir holds root alone: anything else in it escaped the contents root.
	dir, root string
}

var (
	fuzzOnce sync.Once
	fuzzSrv  *fuzzServer
	fuzzErr  error
)

// sharedFuzzServer starts one server per process (each fuzzing worker is one) and keeps it
// for the process's life: a server per input would measure its start, not the handlers.
func sharedFuzzServer(t testing.TB) *fuzzServer {
	fuzzOnce.Do(func() {
		dir, err := os.MkdirTemp(binDir, "fuzz-")
		if err != nil {
			fuzzErr = err
			return
		}
		root := filepath.Join(dir, "root")
		if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
			fuzzErr = err
			return
		}
		nb, _ := json.Marshal(notebookContent(0, 1, 100))
		for name, data := range map[string][]byte{"a.ipynb": nb, "t.txt": []byte("hello\n"), "d/b.txt": []byte("b")} {
			if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
				fuzzErr = err
				return
			}
		}
		store, err := contents.New(root, contents.Options{MaxCheckpoints: 2})
		if err != nil {
			fuzzErr = err
			return
		}
		srv, err := apiserver.New(apiserver.Options{
			Token: testToken, User: identity.User{Name: "alice"}, CookieSecret: bytes.Repeat([]byte("k"), 32),
			Contents: store, MaxBodyBytes: fuzzMaxBody, Log: logr.Discard(),
		})
		if err != nil {
			fuzzErr = err
			return
		}
		hs := httptest.NewServer(srv.Handler())
		fuzzSrv = &fuzzServer{addr: hs.Listener.Addr().String(), dir: dir, root: root}
	})
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	return fuzzSrv
}

// fuzzSeeds are realistic requests of Jupyter clients at every route, and a few hostile
// ones: method, target, header lines, body.
var fuzzSeeds = []struct{ method, target, header, body string }{
	{"GET", "/api", "", ""},
	{"GET", "/api/status", "", ""},
	{"GET", "/api/me?permissions=%7B%22contents%22%3A%5B%22read%22%5D%7D", "", ""},
	{"GET", "/api/spec.yaml", "", ""},
	{"GET", "/api/contents?content=1&type=directory", "", ""},
	{"GET", "/api/contents/a.ipynb?type=notebook&content=1&hash=1", "", ""},
	{"GET", "/api/contents/t.txt?type=file&format=base64", "", ""},
	{"PUT", "/api/contents/n.ipynb", "Content-Type: application/json", `{"type":"notebook","content":{"cells":[{"cell_type":"code","id":"x","metadata":{},"source":"1+1","outputs":[],"execution_count":null}],"metadata":{},"nbformat":4,"nbformat_minor":5}}`},
	{"PUT", "/api/contents/a.ipynb", "If-Match: \"abc\"", `{"type":"notebook","content":{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}}`},
	{"PUT", "/api/contents/u.txt", "", `{"type":"file","format":"text","content":"hi"}`},
	{"PUT", "/api/contents/up.bin", "", `{"type":"file","format":"base64","content":"aGk=","chunk":1}`},
	{"PUT", "/api/contents/up.bin", "", `{"type":"file","format":"base64","content":"aGk=","chunk":-1}`},
	{"POST", "/api/contents/d", "", `{"type":"notebook"}`},
	{"POST", "/api/contents", "", `{"copy_from":"a.ipynb"}`},
	{"POST", "/api/contents", "", `{"type":"directory"}`},
	{"PATCH", "/api/contents/u.txt", "", `{"path":"d/u2.txt"}`},
	{"DELETE", "/api/contents/d/u2.txt", "", ""},
	{"POST", "/api/contents/a.ipynb/checkpoints", "", ""},
	{"GET", "/api/contents/a.ipynb/checkpoints", "", ""},
	{"POST", "/api/contents/a.ipynb/checkpoints/checkpoint", "", ""},
	{"DELETE", "/api/contents/a.ipynb/checkpoints/checkpoint", "", ""},
	{"POST", "/api/contents/a.ipynb/trust", "", ""},
	{"GET", "/api/trash", "", ""},
	{"POST", "/api/trash/0123/restore", "", ""},
	{"GET", "/files/t.txt?download=1", "", ""},
	{"GET", "/nbconvert/html/a.ipynb", "", ""},
	{"POST", "/nbconvert/script", "", `{"content":{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}}`},
	{"GET", "/api/kernelspecs", "", ""},
	{"GET", "/kernelspecs/python3/logo-64x64.png", "", ""},
	{"GET", "/api/kernels", "", ""},
	{"POST", "/api/kernels", "", `{"name":"python3","path":"a.ipynb"}`},
	{"POST", "/api/kernels/k1/restart", "", ""},
	{"GET", "/api/kernels/k1/channels?session_id=s1", "Connection: Upgrade\nUpgrade: websocket\nSec-WebSocket-Version: 13\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Protocol: v1.kernel.websocket.jupyter.org", ""},
	{"POST", "/api/sessions", "", `{"path":"a.ipynb","name":"a.ipynb","type":"notebook","kernel":{"name":"python3"}}`},
	{"PATCH", "/api/sessions/s1", "", `{"path":"b.ipynb"}`},
	{"GET", "/api/clusters", "", ""},
	{"POST", "/api/clusters/default/start?n=2", "", ""},
	{"GET", "/notebooks", "", ""},
	{"POST", "/notebooks", "", `{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}`},
	{"PUT", "/notebooks/00000000-0000-0000-0000-000000000000?name=x", "", `{"metadata":{},"nbformat":3,"worksheets":[]}`},
	{"GET", "/kernels/k1/shell", "Connection: Upgrade\nUpgrade: websocket", ""},
	{"POST", "/rstservice/render", "Content-Type: text/plain", "*hello*"},
	{"GET", "/tree/d", "Accept: text/html", ""},
	{"POST", "/login?next=%2Ftree", "Content-Type: application/x-www-form-urlencoded", "password=nope"},
	{"GET", "/%5Cevil.example/", "", ""},
	{"GET", "/api/contents/..%2f..%2fetc%2fpasswd", "", ""},
	{"PUT", "/api/contents/%2e%2e/escape.txt", "", `{"type":"file","format":"text","content":"x"}`},
	{"PUT", "/api/contents/.nbkube/x", "", `{"type":"file","format":"text","content":"x"}`},
	{"PUT", "/api/contents/big.ipynb", "", `{"type":"notebook","content":{"nbformat":4,"cells":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]}}`},
	{"GET", "/api/contents?token=nope", "Authorization: token nope", ""},
}

func FuzzAPI(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.method, s.target, s.header, []byte(s.body), true)
	}
	f.Add("GET", "/api/contents", "", []byte(nil), false)
	f.Fuzz(func(t *testing.T, method, target, header string, body []byte, withToken bool) {
		srv := sharedFuzzServer(t)
		raw := rawRequest(method, target, header, body, withToken)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		status, ctype, respBody, err := roundTrip(srv.addr, raw)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%q: %v", raw[:min(len(raw), 300)], err)
		}
		if status == http.StatusInternalServerError && !jupyters500(respBody) {
			t.Fatalf("%s %q: 500 %s", method, target, respBody)
		}
		if strings.HasPrefix(ctype, "application/json") && !json.Valid(respBody) {
			t.Fatalf("%s %q: %d with a JSON content type and body %q", method, target, status, respBody)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > requestAllocBound {
			t.Fatalf("%s %q with a %d-byte body allocated %d bytes", method, target, len(body), n)
		}
		entries, err := os.ReadDir(srv.dir)
		if err != nil || len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("%s %q: beside the contents root: %v (%v)", method, target, names, err)
		}
	})
}

// jupyters500 tells the one 500 the API answers to a client's input on purpose: Jupyter
// Server answers an export that fails, an unreadable posted notebook included, with 500
// "nbconvert failed: <why>", and its clients expect it (docs/api.md, "Exports"). Every other
// 500 ("Unhandled error", a panic) is a bug.
func jupyters500(body []byte) bool {
	var e struct{ Message string }
	return json.Unmarshal(body, &e) == nil && strings.HasPrefix(e.Message, "nbconvert failed: ")
}

// rawRequest is the request's bytes as a client would send them. The body's framing is the
// test's (a fuzzed Content-Length or Transfer-Encoding would only make the server wait for
// bytes that never come), the rest is the fuzzer's.
func rawRequest(method, target, header string, body []byte, withToken bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, target)
	for line := range strings.SplitSeq(header, "\n") {
		line = strings.TrimRight(line, "\r")
		name, _, _ := strings.Cut(line, ":")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "", "content-length", "transfer-encoding", "host":
			continue
		}
		b.WriteString(line + "\r\n")
	}
	if withToken {
		b.WriteString("Authorization: token " + testToken + "\r\n")
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	return b.Bytes()
}

// roundTrip sends raw on a new connection and reads the answer; the server must answer
// within the bound.
func roundTrip(addr string, raw []byte) (status int, ctype string, body []byte, err error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, "", nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return 0, "", nil, err
	}
	if _, err := conn.Write(raw); err != nil {
		return 0, "", nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", nil, fmt.Errorf("no answer: %w", err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	// net/http answers a request it cannot parse (a method of bytes no method has) with its
	// own plain-text 400 and closes the connection with the rest of the request unread, so
	// the kernel resets it, which can cut that answer on its way. The answer is the HTTP
	// library's, before any of the API's code ran.
	byNetHTTP := resp.StatusCode == http.StatusBadRequest && errors.Is(err, syscall.ECONNRESET) &&
		strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain")
	if err != nil && resp.StatusCode != http.StatusSwitchingProtocols && !byNetHTTP {
		return 0, "", nil, fmt.Errorf("%d, body cut: %w", resp.StatusCode, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body, nil
}

// FuzzClientFrame decodes a client's WebSocket frame as the agent does (the decoder by
// subprotocol and frame type, the production limits, then the headers it reads). What
// internal/wire's own fuzz targets check (no panic, round trips) is not repeated here; this
// one adds the memory bound: decoding never allocates more than a small multiple of the
// frame, and an accepted message holds no more bytes than the frame had.
func FuzzClientFrame(f *testing.F) {
	header := `{"msg_id":"m1","msg_type":"execute_request","session":"s1","username":"u","date":"2024-01-01T00:00:00Z","version":"5.3"}`
	m := &wire.Message{Channel: wire.Shell, Header: json.RawMessage(header), ParentHeader: json.RawMessage(`{}`),
		Metadata: json.RawMessage(`{}`), Content: json.RawMessage(`{"code":"print(1)","silent":false}`)}
	js, err := wire.EncodeJSON(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), js)
	withBuf := *m
	withBuf.Buffers = [][]byte{[]byte("buffer")}
	bin, err := wire.EncodeBinary(&withBuf)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(1), bin)
	f.Add(uint8(2), wire.EncodeV1(&withBuf))
	f.Add(uint8(2), []byte("\xff\xff\xff\xff\xff\xff\xff\x7f"))
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		msg, n, err := decodeClientFrame(kind, data)
		if bound := uint64(8*len(data) + 64<<10); n > bound {
			// The count is the whole process's: measure again before blaming the decoder
			// for what another goroutine allocated meanwhile.
			if _, again, _ := decodeClientFrame(kind, data); again > bound {
				t.Fatalf("decoding %d bytes (kind %d) allocated %d bytes, more than %d", len(data), kind%3, min(n, again), bound)
			}
		}
		if err != nil {
			return
		}
		held := len(msg.Channel) + len(msg.Header) + len(msg.ParentHeader) + len(msg.Metadata) + len(msg.Content)
		for _, b := range msg.Buffers {
			held += len(b)
		}
		// Decoders set "{}" for absent dicts: 2 bytes each at most beyond the frame.
		if held > len(data)+8 {
			t.Fatalf("a %d-byte frame (kind %d) decoded into %d bytes", len(data), kind%3, held)
		}
	})
}

// decodeClientFrame decodes data as the agent decodes a client's frame of the given kind and
// reads its headers, and says how many bytes the process allocated meanwhile.
func decodeClientFrame(kind uint8, data []byte) (msg *wire.Message, allocated uint64, err error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	switch kind % 3 {
	case 0: // a text frame, Jupyter's JSON protocol
		msg, err = wire.DecodeJSON(data, wire.Limits{})
	case 1: // a binary frame of the legacy protocol
		msg, err = wire.DecodeBinary(data, wire.Limits{})
	default: // a binary frame of v1.kernel.websocket.jupyter.org
		msg, err = wire.DecodeV1(data, wire.Limits{})
	}
	if err == nil {
		_, _ = wire.ParseHeader(msg.Header)
		_, _ = wire.ParseDecodedHeader(msg.ParentHeader)
	}
	runtime.ReadMemStats(&after)
	return msg, after.TotalAlloc - before.TotalAlloc, err
}
