package ipcluster

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The files ipcontroller wrote for --ports=10101-10120 (docs/ipyparallel.md §1), with this
// test's key, interface and location.
var (
	wantEngineFile = map[string]any{
		"ssh": "", "interface": "tcp://c1-ipcontroller.ns.svc", "registration": 10101.0,
		"control": 10102.0, "mux": 10103.0, "task": 10104.0, "iopub": 10105.0, "hb_ping": 10106.0, "hb_pong": 10107.0,
		"broadcast": []any{10108.0, 10109.0},
		"key":       "0123abcd", "curve_serverkey": nil, "location": "c1-ipcontroller",
		"pack": "json", "unpack": "json", "signature_scheme": "hmac-sha256",
	}
	wantClientFile = map[string]any{
		"ssh": "", "interface": "tcp://c1-ipcontroller.ns.svc", "registration": 10101.0,
		"control": 10110.0, "mux": 10111.0, "task": 10112.0, "task_scheme": "leastload", "iopub": 10113.0,
		"notification": 10114.0, "broadcast": 10115.0,
		"key": "0123abcd", "curve_serverkey": nil, "location": "c1-ipcontroller",
		"pack": "json", "unpack": "json", "signature_scheme": "hmac-sha256",
	}
)

func TestConnectionFiles_HaveIPControllersKeysAndPortLayout(t *testing.T) {
	conn := Connection{Key: "0123abcd", Interface: "tcp://c1-ipcontroller.ns.svc", Location: "c1-ipcontroller"}
	for _, tc := range []struct {
		name  string
		build func(Connection) ([]byte, error)
		want  map[string]any
	}{
		{"engine", EngineFile, wantEngineFile},
		{"client", ClientFile, wantClientFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.build(conn)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, b)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("file (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServicePorts_AreRegistrationAndEveryPortOfTheFiles(t *testing.T) {
	var inFiles []int32
	for _, file := range []map[string]any{wantEngineFile, wantClientFile} {
		for _, v := range file {
			switch v := v.(type) {
			case float64:
				inFiles = append(inFiles, int32(v))
			case []any:
				for _, p := range v {
					inFiles = append(inFiles, int32(p.(float64)))
				}
			}
		}
	}
	slices.Sort(inFiles)
	if diff := cmp.Diff(slices.Compact(inFiles), ServicePorts()); diff != "" {
		t.Errorf("ServicePorts (-ports of the files +got):\n%s", diff)
	}
}

func TestConnectionFiles_RejectWhatIPyParallelCannotUse(t *testing.T) {
	for name, c := range map[string]Connection{
		"empty key":              {Interface: "tcp://x"},
		"key with a space":       {Key: "k y", Interface: "tcp://x"},
		"key with a newline":     {Key: "k\n", Interface: "tcp://x"},
		"key not ASCII":          {Key: "clé", Interface: "tcp://x"},
		"interface without tcp":  {Key: "k", Interface: "x"},
		"other transport":        {Key: "k", Interface: "ipc://x"},
		"interface with a port":  {Key: "k", Interface: "tcp://x:1"},
		"interface without host": {Key: "k", Interface: "tcp://"},
	} {
		if _, err := EngineFile(c); err == nil {
			t.Errorf("%s: EngineFile(%+v) accepted", name, c)
		}
		if _, err := ClientFile(c); err == nil {
			t.Errorf("%s: ClientFile(%+v) accepted", name, c)
		}
	}
	for _, iface := range []string{"tcp://0.0.0.0", "tcp://*", "tcp://127.0.0.5", "tcp://c1-ipcontroller.ns.svc"} {
		if _, err := EngineFile(Connection{Key: "k", Interface: iface}); err != nil {
			t.Errorf("interface %s: %v", iface, err)
		}
	}
}
