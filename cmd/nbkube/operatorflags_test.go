package main

import (
	"flag"
	"testing"

	"k8s.io/client-go/rest"
)

// --kube-api-qps and --kube-api-burst bound the process's client; without them it keeps the
// config it was given (no client-side limit).
func TestOperatorFlags_ClientSideLimits(t *testing.T) {
	base := &rest.Config{Host: "https://k8s.example", QPS: -1}
	for _, tc := range []struct {
		args      []string
		qps       float32
		burst     int
		wantErr   bool
		unchanged bool
	}{
		{args: nil, unchanged: true},
		{args: []string{"--kube-api-qps=50"}, qps: 50, burst: 100},
		{args: []string{"--kube-api-qps=50", "--kube-api-burst=80"}, qps: 50, burst: 80},
		{args: []string{"--kube-api-qps=0.2"}, qps: 0.2, burst: 1},
		{args: []string{"--kube-api-qps=-1"}, wantErr: true},
		{args: []string{"--kube-api-qps=NaN"}, wantErr: true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := bindOperatorFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg, err := f.restConfig(base)
		switch {
		case tc.wantErr:
			if err == nil {
				t.Errorf("%v: no error", tc.args)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.unchanged:
			if cfg != base {
				t.Errorf("%v: the config was replaced", tc.args)
			}
		case cfg.QPS != tc.qps || cfg.Burst != tc.burst || base.QPS != -1:
			t.Errorf("%v: QPS %v burst %d (base QPS %v), want %v, %d and the base untouched", tc.args, cfg.QPS, cfg.Burst, base.QPS, tc.qps, tc.burst)
		}
	}
}
